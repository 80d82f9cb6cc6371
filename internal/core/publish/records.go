package publish

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// AllAttempts returns every descriptor set recorded for the table, of every
// plan, retired ones included, in no particular order. Readers use it to
// learn the WAL range of each published data file (verification): a data
// file's path is unique to its attempt, so a path found in a manifest names
// exactly one descriptor.
func (s *Store) AllAttempts() ([]*Prepared, error) {
	plans, err := os.ReadDir(s.attemptsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Prepared
	for _, pd := range plans {
		if !pd.IsDir() {
			continue
		}
		dir := filepath.Join(s.attemptsDir(), pd.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			n := e.Name()
			if !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
				continue
			}
			var p Prepared
			if err := readRecord(filepath.Join(dir, n), KindPrepared, &p); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				return nil, err
			}
			out = append(out, &p)
		}
	}
	return out, nil
}
