package wal

import (
	"fmt"

	"github.com/walctl/walctl/internal/core/arrowcheck"
)

// Decoding bytes read back from the WAL (or sent by a client) must never
// panic or allocate beyond the input: a crash or an attacker may have left
// any bytes there, and a checksum an attacker can recompute proves nothing.
// arrow-go trusts the lengths in a message's metadata (FuzzDecodeEntry's
// mutations made it allocate 168 GB for a 300-byte entry), so every decode
// reads its messages through arrowcheck (arrowcheck.NewBoundedStreamReader,
// or arrowcheck.NewMessage for the in-place path: metadata verified,
// lengths bounded by the input, compressed bodies decompressed within the
// budget) with an arrowcheck.Allocator bounded by the input's size, and
// its panics become errors.

// entryAllocator is the allocator of a decode of n input bytes. A WAL
// entry is never compressed, so a decode needs about its own size; the
// slack covers bookkeeping. Beyond it the allocator panics with
// arrowcheck.ErrAllocBound: arrow-go's reader, or decodeGuard, recovers it.
func entryAllocator(n int) *arrowcheck.Allocator {
	return arrowcheck.NewAllocator(2*int64(n) + 1<<20)
}

// decodeGuard turns a panic of a decoder into *err; use it deferred.
func decodeGuard(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("malformed Arrow IPC message: %v: %w", p, ErrSchemaMismatch)
	}
}
