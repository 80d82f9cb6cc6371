package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// stores returns the implementations the contract runs against: a local
// directory and a real versitygw bucket.
func stores(t *testing.T) map[string]objstore.Store {
	t.Helper()
	local := objstore.NewLocal(t.TempDir())
	return map[string]objstore.Store{"local": local, "s3": newS3(t, s3server.Start(t, s3server.Options{}), "lake")}
}

// newS3 is the store of prefix in srv's bucket, with the smallest parts;
// each of set may change its options first.
func newS3(t testing.TB, srv *s3server.Server, prefix string, set ...func(*objstore.S3Options)) *objstore.S3 {
	t.Helper()
	o := objstore.S3Options{
		Endpoint: srv.Endpoint, Region: s3server.Region, PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PartSize: objstore.MinPartSize,
	}
	for _, f := range set {
		f(&o)
	}
	s, err := objstore.NewS3(context.Background(), srv.Bucket, prefix, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreContract(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if _, err := s.Get(ctx, "t.lance/missing"); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
			}
			if _, err := s.Stat(ctx, "t.lance/missing"); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("Stat of a missing key: %v, want ErrNotFound", err)
			}
			if err := s.Put(ctx, "t.lance/_walctl/plans/a.json", []byte("one")); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, "t.lance/_walctl/plans/a.json", []byte("two")); err != nil {
				t.Fatal(err)
			}
			if b, err := s.Get(ctx, "t.lance/_walctl/plans/a.json"); err != nil || string(b) != "two" {
				t.Fatalf("Get after two Puts: %q, %v", b, err)
			}
			if err := s.PutIfAbsent(ctx, "t.lance/_versions/1.manifest", []byte("v1"), nil); err != nil {
				t.Fatal(err)
			}
			err := s.PutIfAbsent(ctx, "t.lance/_versions/1.manifest", []byte("other"), nil)
			if !errors.Is(err, objstore.ErrExists) {
				t.Fatalf("second PutIfAbsent: %v, want ErrExists", err)
			}
			if b, _ := s.Get(ctx, "t.lance/_versions/1.manifest"); string(b) != "v1" {
				t.Fatalf("the loser overwrote the winner: %q", b)
			}
			if err := s.Put(ctx, "t.lance/_versions/deeper/x", []byte("x")); err != nil {
				t.Fatal(err)
			}
			sub := s.Sub("t.lance")
			list, err := sub.List(ctx, "_versions")
			if err != nil || len(list) != 1 || list[0].Key != "_versions/1.manifest" || list[0].Size != 2 {
				t.Fatalf("List of _versions: %+v, %v (want only 1.manifest, 2 bytes)", list, err)
			}
			tree, err := sub.ListTree(ctx, "_versions")
			if err != nil || len(tree) != 2 || tree[0].Key != "_versions/1.manifest" || tree[1].Key != "_versions/deeper/x" {
				t.Fatalf("ListTree of _versions: %+v, %v", tree, err)
			}
			if list, err := sub.List(ctx, "nothing-here"); err != nil || len(list) != 0 {
				t.Fatalf("List of an empty dir: %+v, %v", list, err)
			}
			if err := s.Delete(ctx, "t.lance/_walctl/plans/a.json"); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "t.lance/_walctl/plans/a.json"); err != nil {
				t.Fatalf("Delete of a missing key: %v", err)
			}
			if _, err := s.Get(ctx, "t.lance/_walctl/plans/a.json"); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("Get after Delete: %v", err)
			}
		})
	}
}

// pattern is n bytes that differ at every offset of a part.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func TestStreamingWriterAndRangedReads(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			// Small (one PUT on S3), over one part but within the writer's
			// two part buffers (one PUT too, of both), and large (a
			// multipart upload of three parts, the last one short).
			for _, n := range []int{1000, objstore.MinPartSize + 54321, 2*objstore.MinPartSize + 12345} {
				want := pattern(n)
				w, err := s.Create(ctx, "data/f.lance")
				if err != nil {
					t.Fatal(err)
				}
				for off := 0; off < n; off += 100_000 {
					if _, err := w.Write(want[off:min(off+100_000, n)]); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := s.Stat(ctx, "data/f.lance"); name == "s3" && !errors.Is(err, objstore.ErrNotFound) {
					t.Fatalf("object visible before Commit: %v", err)
				}
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
				checkStoredChecksum(t, s, name == "s3", w.Committed(), want)
				r, err := s.Open(ctx, "data/f.lance")
				if err != nil || r.Size() != int64(n) {
					t.Fatalf("Open: size %d, %v; want %d", r.Size(), err, n)
				}
				got, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("read back %d bytes, equal=%v, %v", len(got), bytes.Equal(got, want), err)
				}
				tail := make([]byte, 40)
				if _, err := r.ReadAt(tail, int64(n-40)); err != nil || !bytes.Equal(tail, want[n-40:]) {
					t.Fatalf("ReadAt of the tail: %v", err)
				}
				r.Close()
				if err := s.Delete(ctx, "data/f.lance"); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// checkStoredChecksum: on S3 the store keeps the CRC-32C of exactly the
// bytes written (one PUT, or a FULL_OBJECT checksum over the parts of a
// multipart upload) and Stat returns it with the ETag the write returned;
// a local store vouches for none (its verifier reads the file).
func checkStoredChecksum(t *testing.T, s objstore.Store, s3 bool, committed objstore.Info, want []byte) {
	t.Helper()
	in, err := s.Stat(context.Background(), "data/f.lance")
	if err != nil {
		t.Fatal(err)
	}
	if committed.Size != int64(len(want)) || in.Size != int64(len(want)) {
		t.Fatalf("sizes: committed %d, stat %d, want %d", committed.Size, in.Size, len(want))
	}
	sum := crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli))
	if !s3 {
		if in.HasCRC32C || committed.HasCRC32C {
			t.Fatalf("a local store vouches for a checksum: %+v %+v", in, committed)
		}
		return
	}
	if !in.HasCRC32C || in.CRC32C != sum || !committed.HasCRC32C || committed.CRC32C != sum {
		t.Fatalf("%d bytes: stored CRC-32C %08x (%v), committed %08x (%v), want %08x", len(want), in.CRC32C, in.HasCRC32C, committed.CRC32C, committed.HasCRC32C, sum)
	}
	if in.ETag == "" || in.ETag != committed.ETag {
		t.Fatalf("ETag: stat %q, committed %q", in.ETag, committed.ETag)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	s := newS3(t, srv, "lake")
	ctx := context.Background()
	w, err := s.Create(ctx, "t.lance/data/dead.lance")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(pattern(2*objstore.MinPartSize + 1)); err != nil {
		t.Fatal(err)
	}
	if ups, err := s.Uploads(ctx, "t.lance/data"); err != nil || len(ups) != 1 {
		t.Fatalf("a started multipart upload is listed: %+v, %v", ups, err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if ups, err := s.Uploads(ctx, "t.lance/data"); err != nil || len(ups) != 0 {
		t.Fatalf("uploads after Abort: %+v, %v", ups, err)
	}
	if _, err := s.Stat(ctx, "t.lance/data/dead.lance"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("an aborted object exists: %v", err)
	}
}

func TestDeleteIfMatchRemovesOnlyTheObjectRead(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	s := newS3(t, srv, "lake")
	ctx := context.Background()
	if err := s.PutIfAbsent(ctx, "plans/k.json", []byte("first"), nil); err != nil {
		t.Fatal(err)
	}
	_, first, err := s.GetTagged(ctx, "plans/k.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "plans/k.json"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "plans/k.json", []byte("second"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteIfMatch(ctx, "plans/k.json", first); !errors.Is(err, objstore.ErrChanged) {
		t.Fatalf("DeleteIfMatch of a replaced object: %v, want ErrChanged", err)
	}
	b, second, err := s.GetTagged(ctx, "plans/k.json")
	if err != nil || string(b) != "second" {
		t.Fatalf("the new object was removed: %q, %v", b, err)
	}
	if err := s.DeleteIfMatch(ctx, "plans/k.json", second); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteIfMatch(ctx, "plans/k.json", second); err != nil {
		t.Fatalf("DeleteIfMatch of a key already gone: %v", err)
	}
}
