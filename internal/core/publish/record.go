package publish

import (
	"fmt"
	"regexp"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// recordID is what plan ids and attempt ids look like: they name files and
// directories of the store, so nothing else is accepted from a record.
var recordID = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z_-]{0,127}$`)

// checkID refuses an id that could not have been written by walctl.
func checkID(what, id string) error {
	if !recordID.MatchString(id) {
		return fmt.Errorf("%s %q is not a walctl id: %w", what, id, errs.ErrCorrupt)
	}
	return nil
}

// check is what a plan record must satisfy to be adopted: an id and table
// walctl could have written, per-shard ranges of positions from 1 that
// start at the plan's start watermarks, and files that tile every range in
// order. A record that fails is corrupt: it is never adopted nor retired.
func (p *Plan) check() error {
	if err := checkID("plan id", p.ID); err != nil {
		return err
	}
	if err := wal.ValidateName(p.Table); err != nil {
		return fmt.Errorf("plan %s: %v: %w", p.ID, err, errs.ErrCorrupt)
	}
	if len(p.Ranges) == 0 {
		return fmt.Errorf("plan %s has no ranges: %w", p.ID, errs.ErrCorrupt)
	}
	next := map[int]uint64{} // shard → next position its files must start at
	for _, r := range p.Ranges {
		if err := r.check(); err != nil {
			return fmt.Errorf("plan %s: %w", p.ID, err)
		}
		if _, dup := next[r.Shard]; dup {
			return fmt.Errorf("plan %s lists shard %d twice: %w", p.ID, r.Shard, errs.ErrCorrupt)
		}
		if p.Start[r.Shard] != r.From-1 {
			return fmt.Errorf("plan %s: shard %d starts at %d, its start watermark is %d: %w", p.ID, r.Shard, r.From, p.Start[r.Shard], errs.ErrCorrupt)
		}
		next[r.Shard] = r.From
	}
	for _, f := range p.Files {
		if err := f.check(); err != nil {
			return fmt.Errorf("plan %s file: %w", p.ID, err)
		}
		if n, ok := next[f.Shard]; !ok || f.From != n {
			return fmt.Errorf("plan %s: file of shard %d positions %d–%d does not continue its range: %w", p.ID, f.Shard, f.From, f.To, errs.ErrCorrupt)
		}
		next[f.Shard] = f.To + 1
	}
	for _, r := range p.Ranges {
		if next[r.Shard] != r.To+1 {
			return fmt.Errorf("plan %s: the files of shard %d do not cover %d–%d: %w", p.ID, r.Shard, r.From, r.To, errs.ErrCorrupt)
		}
	}
	return nil
}

// check refuses a range no plan could hold.
func (r Range) check() error {
	if r.Shard < 0 || r.From == 0 || r.From > r.To || r.Bytes < 0 {
		return fmt.Errorf("shard %d positions %d–%d (%d bytes) is not a range: %w", r.Shard, r.From, r.To, r.Bytes, errs.ErrCorrupt)
	}
	return nil
}

// check is what a descriptor set must satisfy to be verified and reused:
// ids walctl could have written and one non-empty range per file (the
// files themselves are checked against their descriptors before every
// commit, rule 7).
func (p *Prepared) check() error {
	if err := checkID("plan id", p.Plan); err != nil {
		return err
	}
	if err := checkID("attempt id", p.Attempt); err != nil {
		return err
	}
	if len(p.Files) == 0 {
		return fmt.Errorf("descriptor set %s has no files: %w", p.Attempt, errs.ErrCorrupt)
	}
	for _, f := range p.Files {
		if err := f.Range.check(); err != nil {
			return fmt.Errorf("descriptor set %s file %s: %w", p.Attempt, f.Descriptor.Path, err)
		}
	}
	return nil
}
