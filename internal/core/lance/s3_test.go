package lance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// s3Store is the bucket prefix lake/ of srv reached through endpoint (the
// server's own, or a proxy in front of it), with its own client.
func s3Store(t *testing.T, srv *s3server.Server, endpoint string) objstore.Store {
	t.Helper()
	s, err := objstore.NewS3(context.Background(), srv.Bucket, "lake", objstore.S3Options{
		Endpoint: endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func s3Oracle(t *testing.T, srv *s3server.Server) *oracle.Oracle {
	return oracletest.MustFind(t).WithStorage(oracle.S3Options(srv.Endpoint, s3server.Region, srv.AccessKey, srv.SecretKey))
}

// Two committers with their own clients race for version 2 of a table in a
// bucket: the conditional PUT lets exactly one win, the other retries from
// the new parent, and the official reader reads every row once from the
// bucket. Manifests carry the naming the official writer uses on object
// stores.
func TestS3RacingWritersOneWinsNoneLost(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	o := s3Oracle(t, srv)
	var ds [2]*Dataset
	var err error
	if ds[0], err = CreateStore(s3Store(t, srv, srv.Endpoint).Sub("t.lance"), small, CreateOptions{FileVersion: FileVersion2_0}); err != nil {
		t.Fatal(err)
	}
	if ds[1], err = OpenStore(s3Store(t, srv, srv.Endpoint).Sub("t.lance")); err != nil {
		t.Fatal(err)
	}
	var reqs [2]CommitRequest
	for i := range ds {
		r := smallBatch(i*100, 100)
		reqs[i] = CommitRequest{ParentVersion: 1, Kind: Append, Files: []Descriptor{writeFile(t, ds[i], r)}, TxnID: fmt.Sprintf("txn-%d", i)}
		r.Release()
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var errs2 [2]error
	for i := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs2[i] = ds[i].Commit(context.Background(), reqs[i])
		}()
	}
	close(start)
	wg.Wait()
	loser := -1
	for i, err := range errs2 {
		switch {
		case err == nil:
		case errors.Is(err, ErrCommitConflict):
			if loser != -1 {
				t.Fatal("both writers lost")
			}
			loser = i
		default:
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if loser == -1 {
		t.Fatal("both writers won version 2")
	}
	res, err := ds[loser].CommitLatest(context.Background(), reqs[loser], 3)
	if err != nil || res.Version != 3 {
		t.Fatalf("the loser's retry: %+v, %v; want version 3", res, err)
	}
	vs, err := ds[0].Versions()
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions: %+v, %v", vs, err)
	}
	for _, v := range vs {
		if !v.V2Naming {
			t.Fatalf("version %d is %s, want the {u64::MAX-v}.manifest naming", v.Version, v.Path)
		}
	}
	wantIDs(t, "walctl", walctlIDs(t, ds[1]), 200)
	wantIDs(t, "official", oracleIDs(t, o, ds[0].Root()), 200)
}

// The answer to the commit's PUT is lost after the manifest landed: the
// commit is unknown, never retried blindly; re-reading finds it, and
// CommitLatest with the same transaction id commits nothing twice.
func TestS3LostCommitAnswerResolvedByReread(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	proxy := s3server.NewLossyProxy(t, srv)
	d, err := CreateStore(s3Store(t, srv, proxy.Endpoint).Sub("t.lance"), small, CreateOptions{FileVersion: FileVersion2_0})
	if err != nil {
		t.Fatal(err)
	}
	r := smallBatch(0, 100)
	defer r.Release()
	req := CommitRequest{ParentVersion: 1, Kind: Append, Files: []Descriptor{writeFile(t, d, r)}, TxnID: "txn-lost"}
	proxy.Arm("/_versions/")
	_, err = d.Commit(context.Background(), req)
	proxy.Arm("")
	if !errors.Is(err, ErrCommitUnknown) || errors.Is(err, ErrCommitConflict) {
		t.Fatalf("commit whose answer was lost: %v, want ErrCommitUnknown", err)
	}
	if proxy.Lost() != 1 {
		t.Fatalf("the manifest PUT was sent %d times, want once (no blind retry)", proxy.Lost())
	}
	v, found, err := d.FindTransaction("txn-lost", 1)
	if err != nil || !found || v != 2 {
		t.Fatalf("re-read: version %d found %v, %v; want version 2", v, found, err)
	}
	res, err := d.CommitLatest(context.Background(), req, 3)
	if err != nil || res.Version != 2 {
		t.Fatalf("CommitLatest of the same transaction: %+v, %v; want the existing version 2", res, err)
	}
	if latest, _ := d.LatestVersion(); latest != 2 {
		t.Fatalf("latest is %d: the files were committed twice", latest)
	}
	wantIDs(t, "official", oracleIDs(t, s3Oracle(t, srv), d.Root()), 100)
}

// The official writer appends to a walctl table in the bucket; walctl reads
// its rows and appends after it; the official reader reads all of them, at
// the latest and at an earlier version.
func TestS3OfficialAppendThenWalctl(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	o := s3Oracle(t, srv)
	d, err := CreateStore(s3Store(t, srv, srv.Endpoint).Sub("t.lance"), small, CreateOptions{FileVersion: FileVersion2_0})
	if err != nil {
		t.Fatal(err)
	}
	r := smallBatch(0, 100)
	appendFiles(t, d, nil, writeFile(t, d, r))
	r.Release()
	if res, err := o.Append(testCtx(t), d.Root(), smallRows(100, 50)); err != nil {
		t.Fatalf("official append: %+v, %v", res, err)
	}
	wantIDs(t, "walctl after the official append", walctlIDs(t, d), 150)
	r = smallBatch(150, 50)
	res := appendFiles(t, d, nil, writeFile(t, d, r))
	r.Release()
	wantIDs(t, "official", oracleIDs(t, o, d.Root()), 200)
	dump, err := o.Dump(testCtx(t), d.Root(), oracle.DumpOptions{Version: 2, Columns: []string{"id"}})
	if err != nil || dump.CountRows != 100 {
		t.Fatalf("official read of version 2: %+v, %v; want 100 rows", dump, err)
	}
	if res.Version != 4 {
		t.Fatalf("walctl's append made version %d, want 4", res.Version)
	}
}

// headFailsOnce is a store whose next Stat (an S3 HEAD) of a manifest fails
// with a 503 once armed, as a loaded store answers now and then.
type headFailsOnce struct {
	objstore.Store
	armed atomic.Bool
}

func (s *headFailsOnce) Stat(ctx context.Context, key string) (objstore.Info, error) {
	if strings.HasPrefix(key, versionsDir+"/") && s.armed.CompareAndSwap(true, false) {
		return objstore.Info{}, fmt.Errorf("HEAD %s: 503 Slow Down: %w", s.Join(key), errs.ErrUnavailable)
	}
	return s.Store.Stat(ctx, key)
}

// Issue 31, finding 1. A table whose manifests use the plain N.manifest
// naming; two writers race for version 2 on parent 1, and one of them saw a
// HEAD fail. The naming of version 2 is that of the version 1 each writer
// read, so both create the same key and the conditional create lets exactly
// one win: the other loses the race and its retry commits version 3. (The
// naming used to be chosen by a HEAD of the parent's plain name: a failed
// HEAD chose the other naming and both writers won version 2.)
func TestS3PlainNamedTableHasOneWinnerWhenAHeadFails(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	ctx := testCtx(t)
	st := s3Store(t, srv, srv.Endpoint).Sub("t.lance")
	if _, err := CreateStore(st, small, CreateOptions{FileVersion: FileVersion2_0}); err != nil {
		t.Fatal(err)
	}
	// Rename version 1 to the plain naming, as older writers left it.
	v1, err := st.Get(ctx, versionsDir+"/"+manifestName(1, true))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, versionsDir+"/"+manifestName(1, false), v1); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, versionsDir+"/"+manifestName(1, true)); err != nil {
		t.Fatal(err)
	}
	a, err := OpenStore(s3Store(t, srv, srv.Endpoint).Sub("t.lance"))
	if err != nil {
		t.Fatal(err)
	}
	flaky := &headFailsOnce{Store: s3Store(t, srv, srv.Endpoint).Sub("t.lance")}
	b, err := OpenStore(flaky)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]CommitRequest, 2)
	for i, d := range []*Dataset{a, b} {
		r := smallBatch(i*100, 100)
		reqs[i] = CommitRequest{ParentVersion: 1, Kind: Append, Files: []Descriptor{writeFile(t, d, r)}, TxnID: fmt.Sprintf("txn-%d", i)}
		r.Release()
	}
	// Writer B gets as far as its PUT; writer A commits in that moment.
	var errA error
	b.Hooks.BeforeLink = func(ctx context.Context, v uint64) error {
		_, errA = a.Commit(ctx, reqs[0])
		return nil
	}
	flaky.armed.Store(true)
	_, errB := b.Commit(ctx, reqs[1])
	b.Hooks.BeforeLink = nil
	flaky.armed.Store(false)
	if errA != nil {
		t.Fatalf("writer A: %v", errA)
	}
	if !errors.Is(errB, ErrCommitConflict) {
		t.Fatalf("writer B: %v; want a lost race (ErrCommitConflict): both writers won version 2", errB)
	}
	res, err := b.CommitLatest(ctx, reqs[1], 3)
	if err != nil || res.Version != 3 {
		t.Fatalf("the loser's retry: %+v, %v; want version 3", res, err)
	}
	vs, err := a.Versions()
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions: %+v, %v; want 1, 2, 3 once each", vs, err)
	}
	for _, v := range vs {
		if v.V2Naming {
			t.Fatalf("version %d is %s: created under a naming other than its parent's", v.Version, v.Path)
		}
	}
	if txn, ok, err := mustManifest(t, a, 2).Transaction(a.store); err != nil || !ok || txn.UUID != "txn-0" {
		t.Fatalf("version 2's transaction: %+v %v %v; want writer A's", txn, ok, err)
	}
	wantIDs(t, "official", oracleIDs(t, s3Oracle(t, srv), a.Root()), 200)
}

func mustManifest(t *testing.T, d *Dataset, v uint64) *Manifest {
	t.Helper()
	m, err := d.Manifest(v)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
