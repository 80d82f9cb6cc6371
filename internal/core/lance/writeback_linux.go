//go:build linux && (amd64 || arm64)

package lance

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writeback of the
// range's dirty pages without waiting for it.
const syncFileRangeWrite = 0x2

// startWriteback asks the kernel to start writing back n bytes of f from
// off. It is only a hint: it neither waits nor makes anything durable (the
// caller's fsync does), so its result is ignored.
func startWriteback(f *os.File, off, n int64) {
	_, _, _ = syscall.Syscall6(syscall.SYS_SYNC_FILE_RANGE, f.Fd(), uintptr(off), uintptr(n), syncFileRangeWrite, 0, 0)
}
