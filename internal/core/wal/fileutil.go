package wal

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/walctl/walctl/internal/core/durable"
)

// writeUint writes a decimal counter file atomically (durable.WriteAtomic:
// temp file, fsync, rename, fsync directory).
func writeUint(dir, name string, v uint64) error {
	return durable.WriteAtomic(filepath.Join(dir, name), []byte(strconv.FormatUint(v, 10)+"\n"))
}

// readUint reads a counter file written by writeUint; a missing file is 0.
func readUint(dir, name string) (uint64, error) {
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return parseUint(p, b)
}

// parseUint decodes a counter file's content; path names it in the error.
func parseUint(path string, b []byte) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		if len(b) > 64 {
			b = append(b[:64:64], "..."...)
		}
		return 0, corruptAt(path, 0, 0, "%q is not a counter", b)
	}
	return v, nil
}
