package durable

import (
	"os"
	"syscall"
)

// fdatasync flushes a file's data and the metadata needed to read it back.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
