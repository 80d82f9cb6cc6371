package walflight

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
	"github.com/walctl/walctl/internal/core/wal"
)

// decodeOverhead is what decoding a stream may allocate beyond the budgets
// of its messages: arrow-go's reader, records and arrays, a ZSTD decoder.
const decodeOverhead = 4 << 20

// flightData is the FlightData a producer sends for stream: each message's
// metadata as data header, its body as data body, desc on the first.
func flightData(stream []byte, desc *flight.FlightDescriptor) []*flight.FlightData {
	var out []*flight.FlightData
	for _, m := range arrowchecktest.Messages(stream) {
		out = append(out, &flight.FlightData{DataHeader: m.Meta, DataBody: m.Body})
	}
	if len(out) == 0 {
		out = append(out, &flight.FlightData{})
	}
	out[0].FlightDescriptor = desc
	return out
}

// recvFrom returns the messages one by one, then io.EOF.
func recvFrom(fds []*flight.FlightData) func() (*flight.FlightData, error) {
	return func() (*flight.FlightData, error) {
		if len(fds) == 0 {
			return nil, io.EOF
		}
		fd := fds[0]
		fds = fds[1:]
		return fd, nil
	}
}

// budgetOf is the sum of the messages' budgets and the largest of them.
func budgetOf(fds []*flight.FlightData) (sum, most int64) {
	for _, fd := range fds {
		b := arrowcheck.MessageBudget(len(fd.GetDataHeader()) + len(fd.GetDataBody()))
		sum, most = sum+b, max(most, b)
	}
	return sum, most
}

// TestReadPutHostile: DoPut's decoding of each hostile stream (compressed
// bodies declaring up to 1 TiB, ZSTD bombs, view columns with 2^40
// variadic buffers) ends with InvalidArgument naming what is wrong, hands
// out no batch, and allocates within the budgets of its messages. Each case
// runs in a child process with a bounded address space.
func TestReadPutHostile(t *testing.T) {
	for _, c := range arrowchecktest.Hostile() {
		if c.Framing {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if !arrowchecktest.InChild(t) {
				return
			}
			fds := flightData(c.Stream, putDescriptor("t", 0))
			sum, most := budgetOf(fds)
			alloc := arrowcheck.NewAllocator(0)
			var err error
			n := arrowchecktest.Allocated(func() {
				err = readPut(context.Background(), recvFrom(fds), alloc, func(string, int, arrow.RecordBatch) error {
					return errors.New("a batch came out")
				})
			})
			if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.Want) {
				t.Errorf("got %v, want InvalidArgument naming %q", err, c.Want)
			}
			if n > uint64(sum+decodeOverhead) || alloc.Peak() > most {
				t.Errorf("allocated %d bytes (allocator peak %d); budgets %d, at most %d a message", n, alloc.Peak(), sum, most)
			}
		})
	}
}

// hostileServer answers every DoGet with the messages of a hostile stream.
type hostileServer struct {
	flight.BaseFlightServer
	fds []*flight.FlightData
}

func (s *hostileServer) DoGet(_ *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	for _, fd := range s.fds {
		fd.AppMetadata = []byte(`{"position":1}`)
		if err := stream.Send(fd); err != nil {
			return err
		}
	}
	return nil
}

// TestClientReadHostileAnswers: a server (or something posing as one) that
// answers a read with a hostile stream gets the read refused with an
// error naming what is wrong; the client's process allocates within the
// messages' budgets. Before, the client decoded with flight.NewRecordReader
// and died with the server's own "fatal error: out of memory".
func TestClientReadHostileAnswers(t *testing.T) {
	for _, c := range arrowchecktest.Hostile() {
		if c.Framing {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if !arrowchecktest.InChild(t) {
				return
			}
			fds := flightData(c.Stream, nil)
			sum, _ := budgetOf(fds)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			g := grpc.NewServer()
			flight.RegisterFlightServiceServer(g, &hostileServer{fds: fds})
			go g.Serve(lis)
			defer g.Stop()
			cl, err := newClient(lis.Addr().String(), ClientOptions{Conns: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			cl.Read(context.Background(), "t", 0, 1, 0, func(wal.Entry) error { return nil }) // connects
			n := arrowchecktest.Allocated(func() {
				err = cl.Read(context.Background(), "t", 0, 1, 0, func(wal.Entry) error { return errors.New("an entry came out") })
			})
			if err == nil || !strings.Contains(err.Error(), c.Want) {
				t.Errorf("got %v, want an error naming %q", err, c.Want)
			}
			if n > uint64(sum+decodeOverhead) {
				t.Errorf("allocated %d bytes; budgets %d", n, sum)
			}
		})
	}
}
