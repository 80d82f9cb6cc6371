package hostile

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// serverAddressSpace is the server's `ulimit -v` (KiB): far above what it
// uses, far below what a hostile message declares, so that a server that
// believes the declaration dies the same way on every machine, whether it
// overcommits memory or not.
const serverAddressSpace = 8 << 20

// flightData is the FlightData a producer sends for stream: each message's
// metadata as data header, its body as data body, the put descriptor of
// table "t", shard 0, on the first.
func flightData(stream []byte) []*flight.FlightData {
	var out []*flight.FlightData
	for _, m := range arrowchecktest.Messages(stream) {
		out = append(out, &flight.FlightData{DataHeader: m.Meta, DataBody: m.Body})
	}
	out[0].FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"t", "0"}}
	return out
}

// position is the position a PutResult answers.
func position(t *testing.T, res *flight.PutResult) uint64 {
	t.Helper()
	var m struct{ Position uint64 }
	if err := json.Unmarshal(res.GetAppMetadata(), &m); err != nil || m.Position == 0 {
		t.Fatalf("put result %q: %v", res.GetAppMetadata(), err)
	}
	return m.Position
}

// TestWalServeSurvivesHostileDoPut: one DoPut of a few hundred bytes whose
// compressed body declares 1 TiB (LZ4 or ZSTD), whose ZSTD frame expands
// beyond what it declares, or whose string_view column claims 2^40
// variadic buffers, sent with a raw Flight client to a real `walctl wal
// serve`, is refused with InvalidArgument naming what is wrong. The server
// keeps running: a stream opened before the hostile ones goes on, a
// compressed well-formed stream is ACKed, and the client appends. Before,
// the first such DoPut killed the server ("fatal error: out of memory").
func TestWalServeSurvivesHostileDoPut(t *testing.T) {
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "wal.addr")
	r := proc.NewRunner("/bin/sh", dir)
	srv := r.Start(t, "wal-serve", nil, "-c", `ulimit -v `+strconv.Itoa(serverAddressSpace)+` && exec "$0" "$@"`,
		walctlBin, "wal", "serve", "--dir", filepath.Join(dir, "wal"), "--listen", "127.0.0.1:0", "--addr-file", addrFile)
	addr := srv.WaitFile(addrFile)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := walflight.Dial(ctx, addr, walflight.ClientOptions{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTable(ctx, "t", arrowchecktest.Int64Schema(), 1); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	fc := flight.NewFlightServiceClient(cc)

	// A producer's stream, open across the hostile ones.
	open, err := fc.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range flightData(arrowchecktest.CompressedInt64s()) {
		if err := open.Send(fd); err != nil {
			t.Fatal(err)
		}
	}
	res, err := open.Recv()
	if err != nil || position(t, res) != 1 {
		t.Fatalf("first batch of the open stream: %v %v", res, err)
	}

	for _, hc := range arrowchecktest.Hostile() {
		if hc.Framing {
			continue // a Flight message has no IPC framing to lie about
		}
		ok := t.Run(hc.Name, func(t *testing.T) {
			put, err := fc.DoPut(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, fd := range flightData(hc.Stream) {
				if put.Send(fd) != nil {
					break // the server ended the stream: its status comes from Recv
				}
			}
			put.CloseSend()
			_, err = put.Recv()
			if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), hc.Want) {
				select {
				case <-srv.Done():
					res := srv.Wait()
					t.Fatalf("got %v; wal serve died (exit %d): %s", err, res.Code, fatalLines(res.Stderr))
				case <-time.After(5 * time.Second):
				}
				t.Errorf("got %v, want InvalidArgument naming %q", err, hc.Want)
			}
		})
		if !ok && srv.Exited() {
			t.FailNow()
		}
	}

	// The open stream goes on, with an LZ4-compressed batch this time.
	lz4 := flightData(arrowchecktest.CompressedInt64s(ipc.WithLZ4()))
	if err := open.Send(lz4[1]); err != nil {
		t.Fatal(err)
	}
	if res, err := open.Recv(); err != nil || position(t, res) != 2 {
		t.Fatalf("second batch of the open stream: %v %v", res, err)
	}
	open.CloseSend()
	if _, err := open.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of the open stream: %v", err)
	}
	// A new ZSTD-compressed stream, and the client, are served.
	put, err := fc.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range flightData(arrowchecktest.CompressedInt64s(ipc.WithZstd())) {
		if err := put.Send(fd); err != nil {
			t.Fatal(err)
		}
	}
	put.CloseSend()
	if res, err := put.Recv(); err != nil || position(t, res) != 3 {
		t.Fatalf("ZSTD stream: %v %v", res, err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{5}, nil)
	col := b.NewArray()
	rec := array.NewRecordBatch(arrowchecktest.Int64Schema(), []arrow.Array{col}, 1)
	defer rec.Release()
	col.Release()
	b.Release()
	if pos, err := c.Append(ctx, "t", 0, rec); err != nil || pos != 4 {
		t.Fatalf("append after the hostile streams: %d %v", pos, err)
	}
	if srv.Exited() || strings.Contains(srv.Stderr(), "fatal error") {
		t.Fatalf("wal serve: exited %v; stderr:\n%s", srv.Exited(), srv.Stderr())
	}
}

// fatalLines are the runtime's lines of a crashed process's stderr (its
// "fatal error" and what led to it), without the goroutine dumps.
func fatalLines(stderr string) string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "fatal error") || strings.HasPrefix(l, "runtime:") || strings.HasPrefix(l, "panic:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
