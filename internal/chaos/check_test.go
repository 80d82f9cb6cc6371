package chaos

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
)

// tableCheck is the end-of-run check of one table.
type tableCheck struct {
	acked, rows, unknownSeen int
	unverified               bool // the official reader could not read the table
	lost, duplicated         int
	invented                 []int64 // ids in the table never appended
	problems                 []string
}

// check reads the table with the official reader and walctl verify, and
// reads the epochs of every Lance version.
func (s *system) check(table string, tl *tableLoad) tableCheck {
	var c tableCheck
	acked := tl.acked.Snapshot()
	c.acked = len(acked)
	ids, err := exactlyonce.OracleIDs(s.ctx, s.tablePath(table))
	if err != nil {
		c.problems = append(c.problems, fmt.Sprintf("official reader: %v", err))
		c.unverified = true
		return c
	}
	rep := exactlyonce.Check(ids, acked)
	c.rows, c.lost, c.duplicated = rep.Rows, len(rep.Missing), len(rep.Duplicated)
	tl.mu.Lock()
	for _, id := range rep.Unacked {
		if tl.unknown[id] {
			c.unknownSeen++
		} else {
			c.invented = append(c.invented, id)
		}
	}
	tl.mu.Unlock()
	if c.lost > 0 || c.duplicated > 0 || len(c.invented) > 0 {
		c.problems = append(c.problems, fmt.Sprintf("official reader: %d lost (first %v), %d duplicated (first %v), %d never appended (first %v)",
			c.lost, first(rep.Missing), c.duplicated, first(rep.Duplicated), len(c.invented), first(c.invented)))
	}
	if p := s.verify(table); p != "" {
		c.problems = append(c.problems, p)
	}
	if p := s.epochsNeverDecrease(table); p != "" {
		c.problems = append(c.problems, p)
	}
	return c
}

func first(ids []int64) any {
	if len(ids) == 0 {
		return "-"
	}
	return ids[0]
}

// verify runs `walctl verify`: it must exit 0 reporting ok.
func (s *system) verify(table string) string {
	r := s.walctl.Run(s.t, "verify-"+table, nil, "--data-dir", s.procDir("verify"), "verify", "--table", table, "--output", "json")
	var out struct {
		OK bool `json:"ok"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &out) != nil || !out.OK {
		return fmt.Sprintf("walctl verify --table %s: %s", table, r)
	}
	return ""
}

// epochsNeverDecrease reads every version's manifest: the publisher epoch
// recorded in its config (none counts as 0) never goes down.
func (s *system) epochsNeverDecrease(table string) string {
	ds, err := lance.Open(s.tablePath(table))
	if err != nil {
		return fmt.Sprintf("open %s: %v", table, err)
	}
	vs, err := ds.Versions()
	if err != nil {
		return fmt.Sprintf("versions of %s: %v", table, err)
	}
	slices.SortFunc(vs, func(a, b lance.VersionInfo) int { return cmp.Compare(a.Version, b.Version) })
	var last, lastV uint64
	for _, v := range vs {
		m, err := ds.Manifest(v.Version)
		if err != nil {
			return fmt.Sprintf("manifest %d of %s: %v", v.Version, table, err)
		}
		var e uint64
		if raw, ok := m.Config[publish.KeyEpoch]; ok {
			if e, err = strconv.ParseUint(raw, 10, 64); err != nil {
				return fmt.Sprintf("version %d of %s: epoch %q: %v", v.Version, table, raw, err)
			}
		}
		if e < last {
			return fmt.Sprintf("version %d of %s has epoch %d, below version %d's %d", v.Version, table, e, lastV, last)
		}
		last, lastV = e, v.Version
	}
	return ""
}
