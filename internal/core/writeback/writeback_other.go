//go:build !(linux && (amd64 || arm64))

// Package writeback asks the kernel to start writing a file range back to
// disk before the fsync that makes it durable. Here it does nothing: the
// fsync writes the range back. WriteAt writes a large buffer in the pieces
// the page cache takes fastest.
package writeback

import "os"

// Start is a no-op on this platform.
func Start(*os.File, int64, int64) {}
