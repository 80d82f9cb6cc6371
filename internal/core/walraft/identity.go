package walraft

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/walctl/walctl/internal/core/durable"
)

const identityFile = "identity.json"

// identity is who a replica directory is. ID is generated on the first start
// of an empty directory and never changes for that directory: a wiped
// directory gets a new one, so it can never be counted as the old voter.
type identity struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	ID    string `json:"id"`
}

// loadIdentity reads dir's identity, creating it when dir holds no replica
// state. fresh reports that it was created now (an empty directory).
func loadIdentity(dir, group, name string) (id identity, fresh bool, err error) {
	p := filepath.Join(dir, identityFile)
	b, err := os.ReadFile(p)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &id); err != nil || id.ID == "" {
			return id, false, fmt.Errorf("%w: %s is unreadable (%v)", ErrIdentity, p, err)
		}
		if id.Group != group {
			return id, false, fmt.Errorf("%w: %s belongs to group %q, not %q", ErrIdentity, dir, id.Group, group)
		}
		if id.Name != name {
			return id, false, fmt.Errorf("%w: %s is replica %q, not %q", ErrIdentity, dir, id.Name, name)
		}
		return id, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return id, false, fmt.Errorf("read replica identity %s: %w", p, err)
	}
	for _, sub := range []string{raftDir, walDir, snapDir} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err == nil {
			return id, false, fmt.Errorf("%w: %s holds replica state (%s) but no %s; refusing to invent an identity for it", ErrIdentity, dir, sub, identityFile)
		}
	}
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return id, false, err
	}
	id = identity{Group: group, Name: name, ID: name + "-" + hex.EncodeToString(suffix[:])}
	b, _ = json.Marshal(id)
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return id, false, err
	}
	if err := durable.WriteAtomic(p, append(b, '\n')); err != nil {
		return id, false, fmt.Errorf("write replica identity %s: %w", p, err)
	}
	return id, true, nil
}
