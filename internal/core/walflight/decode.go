package walflight

import (
	"context"
	"errors"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/arrowcheck"
)

// flightReader reads the record batches of a Flight data stream — DoPut's
// requests on the server, DoGet's answers on the client — without
// allocating what a message merely declares. Each message passes an
// arrowcheck.Stream (metadata verified, view columns' buffer counts
// checked, a compressed body decompressed within the budget) and decoding
// it allocates from alloc at most arrowcheck.MessageBudget of the message's
// size (data header plus body); the budget starts anew with each message,
// so a long stream is bounded per message, not by its cumulative size.
// Before, arrow-go's flight.NewRecordReader allocated what a compressed
// buffer declared: one DoPut of 352 bytes declaring 1 TiB killed `wal
// serve` ("fatal error: out of memory").
type flightReader struct {
	*ipc.Reader
	msgs *dataMessages
}

// newFlightReader reads the stream's first message (a schema, possibly
// after a message carrying only the descriptor).
func newFlightReader(recv func() (*flight.FlightData, error), alloc *arrowcheck.Allocator) (*flightReader, error) {
	fd, err := recv()
	if err != nil {
		return nil, err
	}
	m := &dataMessages{recv: recv, alloc: alloc, stream: arrowcheck.NewStream(alloc), desc: fd.GetFlightDescriptor()}
	if len(fd.GetDataHeader()) > 0 {
		m.peeked = fd
	}
	r, err := ipc.NewReaderFromMessageReader(m, ipc.WithAllocator(alloc))
	if err != nil {
		return nil, err
	}
	return &flightReader{Reader: r, msgs: m}, nil
}

// descriptor is the latest flight descriptor the stream carried.
func (r *flightReader) descriptor() *flight.FlightDescriptor { return r.msgs.desc }

// appMetadata is the app metadata of the message of the current batch.
func (r *flightReader) appMetadata() []byte { return r.msgs.appMeta }

// dataMessages is the ipc.MessageReader of a flightReader.
type dataMessages struct {
	recv    func() (*flight.FlightData, error)
	alloc   *arrowcheck.Allocator
	stream  *arrowcheck.Stream // over alloc
	peeked  *flight.FlightData
	desc    *flight.FlightDescriptor
	appMeta []byte
	msg     *ipc.Message
}

func (m *dataMessages) Message() (*ipc.Message, error) {
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
	fd := m.peeked
	m.peeked = nil
	if fd == nil {
		var err error
		if fd, err = m.recv(); err != nil {
			m.appMeta = nil
			return nil, err
		}
	}
	m.appMeta = fd.GetAppMetadata()
	if d := fd.GetFlightDescriptor(); d != nil {
		m.desc = d
	}
	m.alloc.Reset(arrowcheck.MessageBudget(len(fd.GetDataHeader()) + len(fd.GetDataBody())))
	msg, err := m.stream.Message(fd.GetDataHeader(), memory.NewBufferBytes(fd.GetDataBody()))
	if err != nil {
		return nil, err
	}
	m.msg = msg
	return msg, nil
}

func (m *dataMessages) Retain() {}

func (m *dataMessages) Release() {
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}

// readPut reads a DoPut stream from recv: the table and shard its
// descriptor names, then each record batch, handed to fn in order (fn must
// not keep it past the call), decoding with alloc (flightReader). A stream
// that cannot be read ends with InvalidArgument naming what is wrong (or
// the caller's cancellation); fn's errors are returned as they are.
func readPut(ctx context.Context, recv func() (*flight.FlightData, error), alloc *arrowcheck.Allocator,
	fn func(table string, shard int, rec arrow.RecordBatch) error) error {
	rdr, err := newFlightReader(recv, alloc)
	if err != nil {
		return toStatus(readErr(ctx, err))
	}
	defer rdr.Release()
	table, shard, err := parsePutDescriptor(rdr.descriptor())
	if err != nil {
		return toStatus(err)
	}
	for rdr.Next() {
		if err := fn(table, shard, rdr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return toStatus(readErr(ctx, err))
	}
	return nil
}
