package arrowchecktest

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// layout locates the parts of the record batch message of a one-batch
// stream of the fixture schema: its body and, inside its flatbuffer
// metadata, the field-node and buffer vectors (structs of two int64s).
type layout struct {
	stream []byte
	body   int // offset of the body in stream
	nodes  int // offset of field node 0
	bufs   int // offset of buffer 0
}

var le = binary.LittleEndian

// patch returns the valid stream with change applied to it.
func patch(change func(*layout)) []byte {
	l := locate(Valid())
	change(l)
	return l.stream
}

func locate(stream []byte) *layout {
	// message: 0xFFFFFFFF, int32 metadata length, metadata, body
	msg := func(at int) (int, int) {
		if le.Uint32(stream[at:]) != 0xffffffff {
			panic("arrowchecktest: no continuation marker")
		}
		n := int(le.Uint32(stream[at+4:]))
		return at + 8, at + 8 + n
	}
	_, schemaEnd := msg(0)
	metaStart, metaEnd := msg(schemaEnd)
	bodyLen := len(stream) - metaEnd - 8 // the end-of-stream marker follows the body
	l := &layout{stream: stream, body: metaEnd}
	meta := stream[metaStart:metaEnd]
	l.nodes = metaStart + findVector(meta, numNodes, func(s []byte) bool {
		var want bytes.Buffer
		for i := 0; i < numNodes; i++ {
			n, nulls := int64(Rows), int64(0)
			if i == nodeVecItem {
				n = 2 * Rows
			}
			if i == nodeB {
				nulls = 1
			}
			binary.Write(&want, le, [2]int64{n, nulls})
		}
		return bytes.Equal(s, want.Bytes())
	})
	l.bufs = metaStart + findVector(meta, numBufs, func(s []byte) bool {
		prev := int64(0)
		for i := 0; i < numBufs; i++ {
			off, n := int64(le.Uint64(s[16*i:])), int64(le.Uint64(s[16*i+8:]))
			if off%8 != 0 || off < prev || n < 0 || off+n > int64(bodyLen) || (i == 0 && off != 0) {
				return false
			}
			prev = off
		}
		return true
	})
	return l
}

// findVector returns the offset in meta of the first struct of the only
// vector of count 16-byte structs that match accepts.
func findVector(meta []byte, count int, accepts func([]byte) bool) int {
	found := -1
	for p := 0; p+4+16*count <= len(meta); p += 4 {
		if int(le.Uint32(meta[p:])) != count {
			continue
		}
		if accepts(meta[p+4 : p+4+16*count]) {
			if found >= 0 {
				panic("arrowchecktest: two candidate vectors in the metadata")
			}
			found = p + 4
		}
	}
	if found < 0 {
		panic(fmt.Sprintf("arrowchecktest: no vector of %d structs in the metadata", count))
	}
	return found
}

// buffer returns buffer i of the body.
func (l *layout) buffer(i int) []byte {
	at := l.bufs + 16*i
	off, n := int(le.Uint64(l.stream[at:])), int(le.Uint64(l.stream[at+8:]))
	return l.stream[l.body+off : l.body+off+n]
}

func (l *layout) putInt32(buf, i int, v int32) { le.PutUint32(l.buffer(buf)[4*i:], uint32(v)) }
func (l *layout) putInt64(buf, i int, v int64) { le.PutUint64(l.buffer(buf)[8*i:], uint64(v)) }

// setBufLen changes the length buffer i declares (its bytes stay).
func (l *layout) setBufLen(i int, n int64) { le.PutUint64(l.stream[l.bufs+16*i+8:], uint64(n)) }

// setNodeLen changes the length field node i declares.
func (l *layout) setNodeLen(i int, n int64) { le.PutUint64(l.stream[l.nodes+16*i:], uint64(n)) }

// setNullCount changes the null count field node i declares.
func (l *layout) setNullCount(i int, n int64) { le.PutUint64(l.stream[l.nodes+16*i+8:], uint64(n)) }
