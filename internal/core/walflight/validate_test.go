package walflight

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// flightMessages splits an Arrow IPC stream into the FlightData messages a
// producer sends for it (metadata as data header, body as data body), the
// first carrying the put descriptor (stream is one schema and one batch,
// as arrowchecktest writes them). The bytes are sent as they are: no
// Arrow library re-encodes them on the way.
func flightMessages(t *testing.T, stream []byte, desc *flight.FlightDescriptor) []*flight.FlightData {
	t.Helper()
	le := binary.LittleEndian
	msg := func(at int) ([]byte, int) {
		if at+8 > len(stream) || le.Uint32(stream[at:]) != 0xffffffff {
			t.Fatalf("no IPC message at byte %d", at)
		}
		n := int(le.Uint32(stream[at+4:]))
		return stream[at+8 : at+8+n], at + 8 + n
	}
	// A schema message (no body), one record batch message whose body runs
	// to the 8-byte end-of-stream marker.
	schema, at := msg(0)
	batch, body := msg(at)
	out := []*flight.FlightData{{DataHeader: schema}, {DataHeader: batch, DataBody: stream[body : len(stream)-8]}}
	out[0].FlightDescriptor = desc
	return out
}

// rawPut sends stream over a DoPut of its own and returns the server's
// answer: the position it ACKed, or its error mapped as the client maps it.
func rawPut(t *testing.T, fc flight.FlightServiceClient, addr string, stream []byte) (uint64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put, err := fc.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range flightMessages(t, stream, putDescriptor("fx", 0)) {
		if err := put.Send(m); err != nil {
			break // the server ended the stream: its status comes from Recv
		}
	}
	put.CloseSend()
	res, err := put.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			t.Fatal("DoPut ended without a result or an error")
		}
		return 0, fromStatus(ctx, addr, err)
	}
	var pos uint64
	fmt.Sscanf(strings.TrimPrefix(string(res.GetAppMetadata()), `{"position":`), "%d", &pos)
	return pos, nil
}

// TestDoPutRefusesMalformedStreams: rule 17 at the server. Each bad stream,
// sent byte for byte over real gRPC on loopback, is refused with
// InvalidArgument (ErrInvalid on the client) naming its column and row;
// nothing is ACKed and the shard's stats do not change.
func TestDoPutRefusesMalformedStreams(t *testing.T) {
	addr := serveInProcess(t, t.TempDir(), ServeOptions{Engine: wal.Options{QuickOpen: true}})
	c := dial(t, addr, ClientOptions{})
	ctx := context.Background()
	if _, err := c.CreateTable(ctx, "fx", arrowchecktest.Schema(), 1); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	fc := flight.NewFlightServiceClient(cc)
	if pos, err := rawPut(t, fc, addr, arrowchecktest.Valid()); err != nil || pos != 1 {
		t.Fatalf("valid stream: position %d, %v", pos, err)
	}
	before, err := c.Stats(ctx, "fx", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range arrowchecktest.Cases() {
		t.Run(tc.Rule, func(t *testing.T) {
			pos, err := rawPut(t, fc, addr, tc.Stream)
			if err == nil {
				t.Fatalf("ACKed at position %d", pos)
			}
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if !tc.Decoder && (!strings.Contains(err.Error(), fmt.Sprintf("%q", tc.Column)) ||
				tc.Row >= 0 && !strings.Contains(err.Error(), fmt.Sprintf("row %d", tc.Row))) {
				t.Fatalf("got %v, want column %q row %d named", err, tc.Column, tc.Row)
			}
			after, err := c.Stats(ctx, "fx", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("stats changed by a refused stream:\n%+v\n%+v", before, after)
			}
		})
	}
	if pos, err := rawPut(t, fc, addr, arrowchecktest.Valid()); err != nil || pos != 2 {
		t.Fatalf("valid stream after the refusals: position %d, %v", pos, err)
	}
}

// TestCreateTableSchemaRefusedAcrossTheWire: a schema the engine refuses
// keeps its sentinel on the client.
func TestCreateTableSchemaRefusedAcrossTheWire(t *testing.T) {
	addr := serveInProcess(t, t.TempDir(), ServeOptions{Engine: wal.Options{QuickOpen: true}})
	c := dial(t, addr, ClientOptions{})
	s := arrow.NewSchema([]arrow.Field{{Name: "ok", Type: arrow.PrimitiveTypes.Int8},
		{Name: "bad\x1b[2J", Type: arrow.PrimitiveTypes.Int8}}, nil)
	_, err := c.CreateTable(context.Background(), "t", s, 1)
	if !errors.Is(err, arrowcheck.ErrBadSchema) || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `"bad\x1b[2J"`) {
		t.Fatalf("got %v, want ErrBadSchema naming the field, escaped", err)
	}
}

// TestDoPutRefusesHostileMetadata: a schema message whose field vector
// declares about 2^30 fields (found by FuzzBatch) made arrow-go allocate
// beyond memory — a fatal error no recover catches, which would take the
// whole WAL server down. DoPut refuses it as invalid and keeps serving.
func TestDoPutRefusesHostileMetadata(t *testing.T) {
	corpus, err := os.ReadFile(filepath.Join("..", "arrowcheck", "testdata", "fuzz", "FuzzBatch", "found-huge-field-count"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(corpus), "\n")
	lit, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatal(err)
	}
	stream := []byte(lit)
	n := int(binary.LittleEndian.Uint32(stream[4:]))
	schemaMeta := stream[8 : 8+n]

	addr := serveInProcess(t, t.TempDir(), ServeOptions{Engine: wal.Options{QuickOpen: true}})
	c := dial(t, addr, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateTable(ctx, "fx", arrowchecktest.Schema(), 1); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	fc := flight.NewFlightServiceClient(cc)
	put, err := fc.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	put.Send(&flight.FlightData{FlightDescriptor: putDescriptor("fx", 0), DataHeader: schemaMeta})
	put.CloseSend()
	_, err = put.Recv()
	if err = fromStatus(ctx, addr, err); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "runs past") {
		t.Fatalf("got %v, want ErrInvalid naming the vector that runs past the metadata", err)
	}
	if pos, err := rawPut(t, fc, addr, arrowchecktest.Valid()); err != nil || pos != 1 {
		t.Fatalf("server after the hostile stream: position %d, %v", pos, err)
	}
}

// TestClientAppendRefusesMalformedBatches: an in-process producer handing
// the client a malformed batch gets ErrInvalid naming column and row at
// once. Before, a batch the IPC writer could not encode (a negative first
// offset) left a half-sent stream that waited for the deadline and came back
// as "dependency unavailable".
func TestClientAppendRefusesMalformedBatches(t *testing.T) {
	addr := serveInProcess(t, t.TempDir(), ServeOptions{Engine: wal.Options{QuickOpen: true}})
	c := dial(t, addr, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateTable(ctx, "fx", arrowchecktest.Schema(), 1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range arrowchecktest.Cases() {
		if tc.Decoder || errors.Is(tc.Want, arrowcheck.ErrSchema) {
			continue // no batch; or well formed, refused by the server against the table
		}
		t.Run(tc.Rule, func(t *testing.T) {
			r, err := arrowcheck.NewStreamReader(tc.Stream)
			if err != nil || !r.Next() {
				t.Fatalf("decode: %v", err)
			}
			defer r.Release()
			_, err = c.Append(ctx, "fx", 0, r.RecordBatch())
			if !errors.Is(err, arrowcheck.ErrMalformed) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.Column)) {
				t.Fatalf("got %v, want ErrMalformed naming column %q", err, tc.Column)
			}
		})
	}
	if st, err := c.Stats(ctx, "fx", nil); err != nil || st.Shards[0].LastPosition != 0 {
		t.Fatalf("stats after refusals: %+v %v", st, err)
	}
}
