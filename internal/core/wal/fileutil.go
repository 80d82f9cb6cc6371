package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// writeFileAtomic replaces dir/name with data: temp file, fsync, rename,
// fsync dir. A crash leaves either the old or the new content.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, ".tmp-"+name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// writeUint writes a decimal counter file atomically.
func writeUint(dir, name string, v uint64) error {
	return writeFileAtomic(dir, name, []byte(strconv.FormatUint(v, 10)+"\n"))
}

// readUint reads a counter file written by writeUint; a missing file is 0.
func readUint(dir, name string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a counter: %w", filepath.Join(dir, name), b, ErrCorruptEntry)
	}
	return v, nil
}
