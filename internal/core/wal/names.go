package wal

import "fmt"

// MaxNameLen is the longest table name accepted, in bytes.
const MaxNameLen = 128

// MaxShards is the largest shard count a table may have.
const MaxShards = 4096

// ValidateName reports whether name may name a table: 1 to MaxNameLen bytes
// of [A-Za-z0-9_-], not starting with '-'. Such a name is safe as a single
// path element (no separators, no dots, so no "..") and as a flag value.
// The error wraps ErrBadName.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("table name is empty: %w", ErrBadName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("table name is %d bytes, at most %d allowed: %w", len(name), MaxNameLen, ErrBadName)
	case name[0] == '-':
		return fmt.Errorf("table name %q starts with '-': %w", name, ErrBadName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("table name %q: byte %q at offset %d is not one of [A-Za-z0-9_-]: %w", name, c, i, ErrBadName)
		}
	}
	return nil
}

// validateShards checks a shard count for registration.
func validateShards(n int) error {
	if n < 1 || n > MaxShards {
		return fmt.Errorf("shard count %d out of range [1, %d]: %w", n, MaxShards, ErrBadShard)
	}
	return nil
}

// checkShard checks a shard number against a table's shard count.
func checkShard(table string, shard, shards int) error {
	if shard < 0 || shard >= shards {
		return fmt.Errorf("table %q has shards 0..%d, got shard %d: %w", table, shards-1, shard, ErrBadShard)
	}
	return nil
}
