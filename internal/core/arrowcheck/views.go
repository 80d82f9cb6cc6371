package arrowcheck

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Stream prepares the messages of one Arrow IPC stream, in order, for
// arrow-go's reader: each passes NewMessage, and a batch must carry a
// variadic buffer count for every view column (string_view, binary_view)
// that the stream's schema has the reader load from it. arrow-go reads
// the count of the i-th view column without checking i against the
// vector's length, from whatever bytes follow it, and sizes a slice by it
// before reading any buffer: a mutated 385-byte stream made it allocate
// 52 MB (FuzzDecode); a count of 2^40 would be 8 TiB. A Stream is used by
// one goroutine.
type Stream struct {
	alloc  *Allocator
	schema bool      // the schema message was seen
	views  viewLoads // of that schema
}

// NewStream returns a Stream whose messages allocate from alloc.
func NewStream(alloc *Allocator) *Stream {
	return &Stream{alloc: alloc}
}

// Message is NewMessage for the stream's next message.
func (s *Stream) Message(meta []byte, body *memory.Buffer) (*ipc.Message, error) {
	if err := VerifyMetadata(meta); err != nil {
		return nil, err
	}
	l, err := layoutOf(meta)
	if err == nil {
		err = s.check(meta, l)
	}
	if err != nil {
		return nil, fmt.Errorf("Arrow IPC message metadata: %v: %w", err, ErrMalformed)
	}
	return newMessage(meta, body, l, s.alloc)
}

// check learns the view columns of the (first) schema message and checks
// a batch carries a variadic buffer count for each it loads.
func (s *Stream) check(meta []byte, l layout) error {
	var need int
	switch l.typ {
	case headerSchema:
		if !s.schema { // the reader keeps the first schema; a later one is refused
			v := &verifier{b: meta}
			s.views = viewLoads{dicts: map[int64]int{}}
			if err := v.schemaViews(&s.views); err != nil {
				return err
			}
			s.schema = true
		}
		return nil
	case headerBatch:
		need = s.views.batch
	case headerDictionary:
		need = s.views.dicts[l.dictID]
	default:
		return nil
	}
	if l.variadic >= 0 && l.variadic < need { // none stored reads as 0 for every column
		return fmt.Errorf("the schema has %d view columns in the batch, the batch carries %d variadic buffer counts", need, l.variadic)
	}
	return nil
}

// viewLoads counts the view arrays arrow-go loads from a record batch of a
// schema (batch) and from the dictionary batch of each dictionary id.
type viewLoads struct {
	batch int
	dicts map[int64]int
}

// schemaViews counts the view columns of the verified schema message in
// v.b: a dictionary-encoded field loads its indices from a record batch
// and its values, children included, from its dictionary batch.
func (v *verifier) schemaViews(out *viewLoads) error {
	root, _ := v.u32(0)
	m, err := v.table(root)
	if err != nil {
		return err
	}
	s, ok, err := v.sub(m, 2)
	if err != nil || !ok {
		return err
	}
	// fieldViews is what loading field f's array from a batch loads.
	var fieldViews func(f fbTable) (int, error)
	// valueViews is what loading f's values loads: f's own type and its
	// children.
	valueViews := func(f fbTable) (int, error) {
		n := 0
		if tp, err := v.field(f, 2, 1); err != nil {
			return 0, err
		} else if tp != 0 && (v.b[tp] == typeBinaryView || v.b[tp] == typeUtf8View) {
			n = 1
		}
		err := v.tables(f, 5, func(c fbTable) error {
			k, err := fieldViews(c)
			n += k
			return err
		})
		return n, err
	}
	fieldViews = func(f fbTable) (int, error) {
		d, ok, err := v.sub(f, 4) // DictionaryEncoding: 0 id
		if err != nil {
			return 0, err
		}
		if !ok {
			return valueViews(f)
		}
		n, err := valueViews(f)
		if err != nil {
			return 0, err
		}
		var id int64
		if p, err := v.field(d, 0, 8); err != nil {
			return 0, err
		} else if p != 0 {
			id = int64(le.Uint64(v.b[p:]))
		}
		out.dicts[id] = n
		return 0, nil
	}
	return v.tables(s, 1, func(f fbTable) error {
		n, err := fieldViews(f)
		out.batch += n
		return err
	})
}

// View types (flatbuffer Type).
const (
	typeBinaryView = 23
	typeUtf8View   = 24
)
