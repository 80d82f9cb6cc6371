package exactlyonce

import (
	"regexp"
	"strconv"
)

// Commit is what a committer logged of a version it created or found its
// plan in: a publication names its plan, a fence its epoch.
type Commit struct {
	Table   string
	Version uint64
	Plan    string // a publication's plan ("" for a fence)
	Epoch   uint64 // a fence's epoch (0 for a publication)
	By      string // the process whose log it is
}

// The log lines of walctl's text logs (log/slog) that name a commit.
var (
	publishedLine = regexp.MustCompile(`msg=published table=(\S+) plan=(\S+) version=(\d+)`)
	fencedLine    = regexp.MustCompile(`msg="table fenced" table=(\S+) epoch=(\d+) parent=(\d+)`)
)

// ParseCommits finds the commits a process logged (by names it).
func ParseCommits(log, by string) []Commit {
	var out []Commit
	for _, m := range publishedLine.FindAllStringSubmatch(log, -1) {
		v, _ := strconv.ParseUint(m[3], 10, 64)
		out = append(out, Commit{Table: m[1], Version: v, Plan: m[2], By: by})
	}
	for _, m := range fencedLine.FindAllStringSubmatch(log, -1) {
		e, _ := strconv.ParseUint(m[2], 10, 64)
		parent, _ := strconv.ParseUint(m[3], 10, 64)
		out = append(out, Commit{Table: m[1], Version: parent + 1, Epoch: e, By: by})
	}
	return out
}

// AuditCommits checks every version of a table (vs) that a committer
// logged (commits, of that table) against what it logged: a publication's
// version records its plan, a fence's carries its epoch. A version a
// clean removed since is not judged. A mismatch is a version number that
// two committers both believe they created (DESIGN.md §3 rule 23).
func AuditCommits(vs []Version, commits []Commit) []string {
	byNumber := map[uint64]*Version{}
	for i := range vs {
		byNumber[vs[i].Number] = &vs[i]
	}
	var f findings
	for _, c := range commits {
		v := byNumber[c.Version]
		switch {
		case v == nil:
		case c.Plan != "" && v.Plan != c.Plan:
			f.add("version %d records plan %q, but %s logged publishing plan %s as version %d", v.Number, v.Plan, c.By, c.Plan, c.Version)
		case c.Plan == "" && v.Epoch != c.Epoch:
			f.add("version %d carries epoch %d, but %s logged fencing it at epoch %d", v.Number, v.Epoch, c.By, c.Epoch)
		}
	}
	return f.done()
}
