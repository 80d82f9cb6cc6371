package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
)

// tableCheck is the end-of-run check of one table.
type tableCheck struct {
	acked, rows, uncertainSeen int
	unverified                 bool // the official reader could not read the table
	lost, duplicated           int
	invented                   int // ids in the table that were refused or never appended
	versions, oracleVersions   int // versions audited, and re-read by the official reader
	commits                    int // logged commits checked against their versions
	problems                   []string
}

// check reads the latest version with the official reader and judges it
// against the ledger, audits every version with walctl's managed reader
// (and some again with the official one), and runs `walctl verify`.
// history is what the versions held at the end of the fault phase.
func (s *system) check(table string, tl *tableLoad, history *exactlyonce.History, o *oracle.Oracle, oracleVersions int) tableCheck {
	var c tableCheck
	ids, err := exactlyonce.OracleIDsWith(s.ctx, o, s.tablePath(table))
	if err != nil {
		c.problems = append(c.problems, fmt.Sprintf("official reader: %v", err))
		c.unverified = true
		return c
	}
	v := tl.ledger.Judge(ids)
	c.acked, c.rows, c.uncertainSeen = v.Acked, v.Rows, v.UncertainSeen
	c.lost, c.duplicated, c.invented = len(v.Missing), len(v.Duplicated), len(v.Refused)+len(v.Invented)
	for _, p := range v.Problems() {
		c.problems = append(c.problems, "official reader: "+p)
	}
	vs, err := exactlyonce.ReadVersions(s.ctx, s.lance, table)
	if err != nil {
		c.problems = append(c.problems, fmt.Sprintf("managed reader: %v", err))
		return c
	}
	c.versions = len(vs)
	c.problems = append(c.problems, tl.ledger.AuditVersions(vs)...)
	c.problems = append(c.problems, history.Observe(vs, s.cleaned)...)
	commits := s.commits(table)
	c.commits = len(commits)
	c.problems = append(c.problems, exactlyonce.AuditCommits(vs, commits)...)
	picked := exactlyonce.PickVersions(vs, oracleVersions)
	c.oracleVersions = len(picked)
	c.problems = append(c.problems, exactlyonce.CrossCheck(s.ctx, o, s.tablePath(table), picked)...)
	if p := s.verify(table); p != "" {
		c.problems = append(c.problems, p)
	}
	return c
}

// observeVersions records what every version of each table holds, for
// the final check to compare with (a version number is created once).
func (s *system) observeVersions(histories map[string]*exactlyonce.History) []string {
	var out []string
	for _, table := range tables {
		vs, err := exactlyonce.ReadVersions(s.ctx, s.lance, table)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: managed reader: %v", table, err))
			continue
		}
		for _, p := range histories[table].Observe(vs, s.cleaned) {
			out = append(out, table+": "+p)
		}
	}
	return out
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

// commits are the commits of table that every process of the run logged:
// members (every process they ran), one-shots and catch-up executors.
func (s *system) commits(table string) []exactlyonce.Commit {
	var all []exactlyonce.Commit
	for _, name := range s.order {
		m := s.members[name]
		for _, log := range append(slices.Clone(m.logs), m.p.Stderr()) {
			all = append(all, exactlyonce.ParseCommits(log, name)...)
		}
	}
	for _, o := range s.oneShots {
		for _, r := range o.results {
			all = append(all, exactlyonce.ParseCommits(r.Stderr, o.f.Kind)...)
		}
	}
	for _, path := range s.executorLogs() {
		if b, err := os.ReadFile(path); err == nil {
			all = append(all, exactlyonce.ParseCommits(string(b), filepath.Base(path))...)
		}
	}
	return slices.DeleteFunc(all, func(c exactlyonce.Commit) bool { return c.Table != table })
}
