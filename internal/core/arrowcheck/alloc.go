package arrowcheck

import (
	"fmt"
	"sync"
)

// What decoding Arrow IPC from outside (a Flight DoPut or DoGet, `wal
// append`'s input, a WAL entry) may allocate. Uncompressed buffers are
// slices of the input and cost nothing; a compressed buffer declares its
// own uncompressed length, which arrow-go allocated before checking it (a
// 352-byte LZ4 stream declaring 1 TiB: "fatal error: out of memory").
const (
	// DecodeRatio and DecodeSlack: n bytes of input may decode to at most
	// DecodeRatio·n + DecodeSlack bytes (DecodeBudget). Columnar data
	// compresses 3–10×; a batch that compresses better than 64× is sent
	// uncompressed or in smaller batches, and small ones fit the slack.
	DecodeRatio = 64
	DecodeSlack = 1 << 20
	// MaxDecodeBytes caps what one message may decompress to, however
	// large it is: the WAL's default largest entry (wal.DefaultMaxEntryBytes),
	// which stores batches uncompressed, so a larger batch could not be
	// stored anyway. Flight readers also cap each message's whole budget
	// with it (MessageBudget).
	MaxDecodeBytes = 256 << 20
)

// DecodeBudget is what decoding n bytes of Arrow IPC received from outside
// may allocate in all: DecodeRatio·n + DecodeSlack.
func DecodeBudget(n int) int64 {
	return DecodeRatio*int64(max(n, 0)) + DecodeSlack
}

// MessageBudget is the budget of one message of n bytes read on its own (a
// Flight message): DecodeBudget(n), at most MaxDecodeBytes. A stream's
// budget is per message, never its cumulative size.
func MessageBudget(n int) int64 {
	return min(DecodeBudget(n), MaxDecodeBytes)
}

// ErrAllocBound is what an Allocator refuses with: a message asked for
// more memory than its budget. It wraps ErrMalformed (errs.ErrInvalid).
var ErrAllocBound = fmt.Errorf("Arrow IPC message asks for more memory than its size allows: %w", ErrMalformed)

// Allocator is a memory.Allocator that hands out at most a budget of bytes
// and panics beyond it with an error wrapping ErrAllocBound, before
// allocating. arrow-go's IPC reader recovers that panic into its error;
// other callers recover it themselves. It is the one allocator of every
// decode of outside bytes (NewStreamReader, NewMessage, the WAL's entry
// decoder, the Flight readers). Freed bytes do not return to the budget:
// a reader of many messages gives each its own budget with Reset.
type Allocator struct {
	mu    sync.Mutex
	limit int64 // budget since the last Reset
	used  int64 // handed out since the last Reset
	peak  int64 // most used under any budget
}

// NewAllocator returns an allocator with a budget of limit bytes.
func NewAllocator(limit int64) *Allocator {
	return &Allocator{limit: limit}
}

// Reset starts a new budget of limit bytes.
func (a *Allocator) Reset(limit int64) {
	a.mu.Lock()
	a.limit, a.used = limit, 0
	a.mu.Unlock()
}

// Take counts n bytes against the budget, or refuses them (ErrAllocBound)
// and counts nothing.
func (a *Allocator) Take(n int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n < 0 || int64(n) > a.limit-a.used {
		return fmt.Errorf("%d bytes asked, %d of the budget of %d left: %w", n, a.limit-a.used, a.limit, ErrAllocBound)
	}
	a.used += int64(n)
	a.peak = max(a.peak, a.used)
	return nil
}

// Left is what remains of the budget.
func (a *Allocator) Left() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limit - a.used
}

// Peak is the most bytes handed out under one budget.
func (a *Allocator) Peak() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peak
}

// Allocate implements memory.Allocator.
func (a *Allocator) Allocate(size int) []byte {
	if err := a.Take(size); err != nil {
		panic(err)
	}
	return make([]byte, size)
}

// Reallocate implements memory.Allocator.
func (a *Allocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	return nb
}

// Free implements memory.Allocator (the garbage collector frees).
func (a *Allocator) Free([]byte) {}
