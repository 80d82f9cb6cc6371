package walflight

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// serveInProcess serves a fresh engine on dir from this process and returns
// its address; the server and engine stop at cleanup.
func serveInProcess(t *testing.T, dir string, opts ServeOptions) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	opts.OnListen = func(a net.Addr) { addrs <- a }
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, dir, "127.0.0.1:0", opts) }()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v", err)
		}
	})
	return addr.String()
}

func TestErrorsCrossTheWire(t *testing.T) {
	dir := t.TempDir()
	addr := serveInProcess(t, dir, ServeOptions{Engine: wal.Options{QuickOpen: true}})
	c := dial(t, addr, ClientOptions{})
	ctx := context.Background()
	if _, err := c.CreateTable(ctx, "t", testSchema, 2); err != nil {
		t.Fatal(err)
	}
	rec := makeRecord(7, 3)
	defer rec.Release()

	check := func(what string, err, sentinel, category error, mention string) {
		t.Helper()
		if !errors.Is(err, sentinel) || !errors.Is(err, category) || !strings.Contains(err.Error(), mention) {
			t.Errorf("%s: got %v, want %v (%v) mentioning %q", what, err, sentinel, category, mention)
		}
	}
	_, err := c.Append(ctx, "nope", 0, rec)
	check("unknown table", err, wal.ErrUnknownTable, errs.ErrNotFound, `"nope"`)
	_, err = c.Table(ctx, "../x")
	check("hostile name", err, wal.ErrBadName, errs.ErrInvalid, "../x")
	_, err = c.Append(ctx, "t", -1, rec)
	check("negative shard", err, wal.ErrBadShard, errs.ErrInvalid, "-1")

	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "extra", Type: arrow.PrimitiveTypes.Int8}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, other)
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(1).(*array.Int8Builder).Append(1)
	bad := b.NewRecordBatch()
	b.Release()
	defer bad.Release()
	_, err = c.Append(ctx, "t", 0, bad)
	check("schema mismatch", err, wal.ErrSchemaMismatch, errs.ErrInvalid, `"extra"`)
	if st, _ := c.Stats(ctx, "t", nil); st.Shards[0].LastPosition != 0 {
		t.Fatalf("refused append wrote something: %+v", st.Shards[0])
	}
	_, err = c.CreateTable(ctx, "t", other, 2)
	check("re-register", err, wal.ErrTableConflict, errs.ErrConflict, `"extra"`)

	for i := 0; i < 3; i++ {
		if pos, err := c.Append(ctx, "t", 0, rec); err != nil || pos != uint64(i+1) {
			t.Fatalf("append %d: %d %v", i, pos, err)
		}
	}
	_, err = c.AdvanceEpoch(ctx, "t", 5)
	var ce *wal.EpochConflictError
	if !errors.As(err, &ce) || ce.Current != 0 || !errors.Is(err, errs.ErrConflict) {
		t.Errorf("epoch conflict: got %v", err)
	}
	if e, err := c.AdvanceEpoch(ctx, "t", 0); err != nil || e != 1 {
		t.Fatalf("advance: %d %v", e, err)
	}
	g, err := c.Seal(ctx, "t", 0)
	if err != nil || !g.Sealed || g.First != 1 || g.Last != 3 {
		t.Fatalf("seal: %+v %v", g, err)
	}
	_, err = c.Trim(ctx, "t", 0, 3, 0)
	check("stale trim", err, wal.ErrStaleEpoch, errs.ErrFenced, "epoch 0")
	err = c.Read(ctx, "t", 0, 2, 9, func(wal.Entry) error { return nil })
	check("read beyond end", err, wal.ErrBeyondEnd, errs.ErrNotFound, "9")

	// A flipped byte in the sealed generation is reported over the wire
	// with its file and position.
	if _, err := flipEntryByte(g.Path, 2); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	err = c.Read(ctx, "t", 0, 1, 0, func(e wal.Entry) error { got = append(got, e.Position); return nil })
	check("corrupt entry", err, wal.ErrCorruptEntry, errs.ErrCorrupt, g.Path)
	if !strings.Contains(err.Error(), "position 2") || len(got) != 1 {
		t.Errorf("corrupt read: %v after %v", err, got)
	}
	if tt, err := c.Trim(ctx, "t", 0, 3, 1); err != nil || tt != 3 {
		t.Fatalf("trim: %d %v", tt, err)
	}
	err = c.Read(ctx, "t", 0, 1, 0, func(wal.Entry) error { return nil })
	check("trimmed read", err, wal.ErrTrimmed, errs.ErrNotFound, "3")

	dctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-dctx.Done()
	_, err = c.Epoch(dctx, "t")
	check("deadline", err, context.DeadlineExceeded, errs.ErrUnavailable, "")
}

// flipEntryByte flips a byte near the end of the n-th (1-based) entry of a
// generation file, located through the entry records (kind 2: offset,
// length) of its .idx sidecar.
func flipEntryByte(path string, n int) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	idx, err := os.ReadFile(strings.TrimSuffix(path, ".arrows") + ".idx")
	if err != nil {
		return 0, err
	}
	for i := 32; i+32 <= len(idx); i += 32 {
		if binary.LittleEndian.Uint32(idx[i:]) != 2 {
			continue
		}
		if n--; n == 0 {
			off := int64(binary.LittleEndian.Uint64(idx[i+8:]) + binary.LittleEndian.Uint64(idx[i+16:]) - 4)
			b[off] ^= 0x01
			return off, os.WriteFile(path, b, 0o644)
		}
	}
	return 0, errors.New("entry not found in index")
}

func TestUnknownJSONFieldsAndMalformedStream(t *testing.T) {
	addr := serveInProcess(t, t.TempDir(), ServeOptions{})
	c := dial(t, addr, ClientOptions{})
	ctx := context.Background()
	var out epochResp
	err := c.do(ctx, ActionEpoch, map[string]any{"name": "t", "bogus": 1}, &out)
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("unknown field: got %v", err)
	}
	err = c.do(ctx, "drop-everything", struct{}{}, &out)
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "drop-everything") {
		t.Fatalf("unknown action: got %v", err)
	}
	// A DoPut whose data is not an Arrow stream.
	if _, err := c.CreateTable(ctx, "t", testSchema, 1); err != nil {
		t.Fatal(err)
	}
	stream, err := c.fl[0].DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&flight.FlightData{FlightDescriptor: putDescriptor("t", 0), DataHeader: []byte("not flatbuffers"), DataBody: []byte("junk")})
	stream.CloseSend()
	_, err = stream.Recv()
	if err = fromStatus(ctx, addr, err); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("malformed stream: got %v", err)
	}
	if st, _ := c.Stats(ctx, "t", nil); st.Shards[0].LastPosition != 0 {
		t.Fatal("malformed stream wrote something")
	}
}

func TestBearerToken(t *testing.T) {
	addr := serveInProcess(t, t.TempDir(), ServeOptions{Server: ServerOptions{Token: "s3cret"}})
	ctx := context.Background()
	for _, tok := range []string{"", "wrong"} {
		_, err := Dial(ctx, addr, ClientOptions{Token: tok})
		if !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("token %q: got %v, want ErrUnauthenticated", tok, err)
		}
	}
	c := dial(t, addr, ClientOptions{Token: "s3cret"})
	if _, err := c.CreateTable(ctx, "t", testSchema, 1); err != nil {
		t.Fatal(err)
	}
	rec := makeRecord(1, 1)
	defer rec.Release()
	if _, err := c.Append(ctx, "t", 0, rec); err != nil { // streams are checked too
		t.Fatal(err)
	}
}

// TestGracefulShutdown cancels Serve while appends are in flight: every
// append that returned a position is durable, Serve returns nil and the
// directory lock is released.
func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	addrFile := filepath.Join(t.TempDir(), "addr")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	listening := make(chan struct{})
	go func() {
		done <- Serve(ctx, dir, "127.0.0.1:0", ServeOptions{AddrFile: addrFile, OnListen: func(net.Addr) { close(listening) }})
	}()
	<-listening
	b, err := os.ReadFile(addrFile)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, strings.TrimSpace(string(b)), ClientOptions{Conns: 2})
	if _, err := c.CreateTable(context.Background(), "t", testSchema, 1); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[uint64]bool{}
	var wg sync.WaitGroup
	first := make(chan struct{}, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				rec := makeRecord(int64(g*100000+i), 10)
				pos, err := c.Append(context.Background(), "t", 0, rec)
				rec.Release()
				if err != nil {
					if !errors.Is(err, errs.ErrUnavailable) {
						t.Errorf("append during shutdown: %v", err)
					}
					return
				}
				mu.Lock()
				acked[pos] = true
				mu.Unlock()
				select {
				case first <- struct{}{}:
				default:
				}
			}
		}(g)
	}
	<-first
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	wg.Wait()
	e, err := wal.Open(dir, wal.Options{MaxGenerationAge: -1})
	if err != nil {
		t.Fatalf("reopen after shutdown: %v", err)
	}
	defer e.Close()
	n := 0
	err = e.Read(context.Background(), "t", 0, 1, 0, func(en wal.Entry) error {
		if acked[en.Position] {
			n++
		}
		return nil
	})
	if err != nil || n != len(acked) || n == 0 {
		t.Fatalf("%d of %d ACKed entries present after graceful shutdown (%v)", n, len(acked), err)
	}
}
