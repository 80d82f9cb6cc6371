package wal

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// Decoding bytes read back from the WAL (or sent by a client) must never
// panic or allocate beyond the input: a crash or an attacker may have left
// any bytes there, and a checksum an attacker can recompute proves nothing.
// arrow-go trusts the lengths in a message's metadata (FuzzDecodeEntry's
// mutations made it allocate 168 GB for a 300-byte entry), so every decode
// reads through arrowcheck.NewStreamReader (metadata verified, lengths
// bounded by the input), with an allocator bounded by the input's size (a
// compressed buffer declares its own uncompressed size), and its panics
// become errors.

// boundedAllocator hands out at most left bytes in total and panics with
// errAllocBound beyond: decoders recover it (decodeGuard). A WAL entry is
// never compressed, so a decode needs about its own size; the slack covers
// bookkeeping.
type boundedAllocator struct{ left int }

var errAllocBound = fmt.Errorf("message metadata asks for more memory than the message holds")

func newBoundedAllocator(inputLen int) *boundedAllocator {
	return &boundedAllocator{left: 2*inputLen + 1<<20}
}

func (a *boundedAllocator) take(n int) {
	if n < 0 || n > a.left {
		panic(errAllocBound)
	}
	a.left -= n
}

// Allocate implements memory.Allocator.
func (a *boundedAllocator) Allocate(size int) []byte {
	a.take(size)
	return make([]byte, size)
}

// Reallocate implements memory.Allocator.
func (a *boundedAllocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	a.take(size)
	nb := make([]byte, size)
	copy(nb, b)
	return nb
}

// Free implements memory.Allocator (the garbage collector frees).
func (a *boundedAllocator) Free([]byte) {}

// decodeLimits are the reader options bounding a decode of n input bytes.
func decodeLimits(n int) []ipc.Option {
	return []ipc.Option{ipc.WithAllocator(newBoundedAllocator(n)),
		ipc.WithMetadataSizeLimit(int64(n) + 8), ipc.WithBodySizeLimit(int64(n) + 8)}
}

// decodeGuard turns a panic of a decoder into *err; use it deferred.
func decodeGuard(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("malformed Arrow IPC message: %v: %w", p, ErrSchemaMismatch)
	}
}
