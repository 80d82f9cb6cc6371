//go:build linux && (amd64 || arm64)

// Package writeback asks the kernel to start writing a file range back to
// disk before the fsync that makes it durable, so the disk works while the
// writer goes on and the fsync finds less to do. It is only a hint: it never
// waits and never makes anything durable. WriteAt writes a large buffer in
// the pieces the page cache takes fastest.
package writeback

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writeback of the
// range's dirty pages without waiting for it.
const syncFileRangeWrite = 0x2

// Start asks the kernel to start writing back n bytes of f from off. Its
// result is ignored: the caller's fsync is what makes the data durable and
// reports write errors.
func Start(f *os.File, off, n int64) {
	_, _, _ = syscall.Syscall6(syscall.SYS_SYNC_FILE_RANGE, f.Fd(), uintptr(off), uintptr(n), syncFileRangeWrite, 0, 0)
}
