package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
)

// damage flips one byte of the first file (same size, other checksum) and
// deletes the second.
func (c *cluster) damage(table string, files []string) {
	c.t.Helper()
	if len(files) < 2 {
		c.t.Fatalf("want at least two prepared files to damage, have %v", files)
	}
	path := filepath.Join(c.tablePath(table), files[0])
	b, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(c.tablePath(table), files[1])); err != nil {
		c.t.Fatal(err)
	}
}

// referenced lists the data files any version of the table references.
func (c *cluster) referenced(table string) map[string]bool {
	c.t.Helper()
	out := map[string]bool{}
	c.eachManifest(table, func(m *lance.Manifest) {
		for _, f := range m.Fragments {
			for _, df := range f.Files {
				out[filepath.Base(df.Path)] = true
			}
		}
	})
	return out
}

// Prepared files deleted or damaged between prepare and publish are
// detected before the commit, prepared again and never published: for a
// successor, and for the preparer itself.
func TestDamagedPreparedFilesAreNeverPublished(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTable("orders")
	p := c.producer("orders", 20)
	p.generation(3, 40)
	p.generation(3, 40)

	t.Run("successor", func(t *testing.T) {
		c := c.forT(t)
		r := c.run("A0-prepare", smallRounds, "prepare", "--table", "orders")
		expect(t, "prepare", r, exitOK)
		a0 := parseSummary(t, r).Rounds[0]
		c.damage("orders", a0.Files)

		r = c.run("B-publish", smallRounds, "publish", "--table", "orders", "--all")
		expect(t, "B publish --all", r, exitOK)
		b := parseSummary(t, r).Rounds[0]
		if b.Outcome != publish.OutcomePublished || b.Plan != a0.Plan || !b.Adopted || b.Reused || b.Attempt == a0.Attempt {
			t.Fatalf("B should adopt the plan and prepare it again:\nA0 %+v\nB  %+v", a0, b)
		}
		retired := filepath.Join(c.tablePath("orders"), "_walctl", "attempts", a0.Plan, a0.Attempt+".retired.json")
		if _, err := os.Stat(retired); err != nil {
			t.Fatalf("the damaged attempt was not retired: %v", err)
		}
		refs := c.referenced("orders")
		for _, f := range a0.Files {
			if refs[filepath.Base(f)] {
				t.Fatalf("damaged or deleted file %s is referenced by the table", f)
			}
		}
		p.c = c
		p.exactlyOnce()
	})

	t.Run("same owner", func(t *testing.T) {
		c := c.forT(t)
		p.c = c
		p.generation(3, 40)
		latest := c.latestVersion("orders")
		a := c.walctl("A-publish", append(fp(failpoint.AfterDescriptorRecord+"=pause"), smallRounds...), "publish", "--table", "orders")
		a.WaitPaused(failpoint.AfterDescriptorRecord)
		plans := c.pinnedPlans("orders")
		if len(plans) != 1 {
			t.Fatalf("pinned plans: %v", plans)
		}
		var files []string
		entries, err := os.ReadDir(filepath.Join(c.tablePath("orders"), "_walctl", "attempts", plans[0]))
		if err != nil || len(entries) != 1 {
			t.Fatalf("attempts of plan %s: %v %v", plans[0], entries, err)
		}
		attempt := strings.TrimSuffix(entries[0].Name(), ".json")
		data, err := os.ReadDir(filepath.Join(c.tablePath("orders"), "data"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range data {
			if strings.Contains(e.Name(), attempt) {
				files = append(files, "data/"+e.Name())
			}
		}
		c.damage("orders", files)
		a.Resume(failpoint.AfterDescriptorRecord)
		ra := a.Wait()
		expect(t, "A after its files were damaged", ra, 6)
		t.Logf("A: %s", lastLine(ra.Stderr))
		if l := c.latestVersion("orders"); l != latest+1 { // its fence only
			t.Fatalf("A committed with damaged files: latest %d, was %d", l, latest)
		}

		r := c.run("A-again", smallRounds, "publish", "--table", "orders", "--all")
		expect(t, "publish --all after the damage", r, exitOK)
		s := parseSummary(t, r)
		if got := s.Rounds[0]; got.Plan != plans[0] || !got.Adopted || got.Reused || got.Attempt == attempt {
			t.Fatalf("the plan should be prepared again: %+v", got)
		}
		refs := c.referenced("orders")
		for _, f := range files {
			if refs[filepath.Base(f)] {
				t.Fatalf("damaged or deleted file %s is referenced by the table", f)
			}
		}
		p.exactlyOnce()
		p.allColumnsMatch()
	})
}

// A table rolled back below the WAL's trimmed point makes planning fail,
// naming both positions, rather than publishing from the first surviving
// entry.
func TestRolledBackTableFailsPlanning(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTable("orders")
	p := c.producer("orders", 21)
	p.generation(2, 30)
	expect(t, "publish 1", c.run("publish", nil, "publish", "--table", "orders", "--all"), exitOK)
	p.generation(2, 30)
	r := c.run("publish", nil, "publish", "--table", "orders", "--all")
	expect(t, "publish 2", r, exitOK)
	last := parseSummary(t, r).published()[0]

	// Restore an older version: drop the latest manifest.
	ds, err := lance.Open(c.tablePath("orders"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := ds.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if vs[len(vs)-1].Version != last.Version {
		t.Fatalf("latest version %d, the last publication made %d", vs[len(vs)-1].Version, last.Version)
	}
	if err := os.Remove(vs[len(vs)-1].Path); err != nil {
		t.Fatal(err)
	}
	ms := c.manifests("orders")
	st, err := publish.ParseState(ms[uint64(len(ms))].config)
	if err != nil {
		t.Fatal(err)
	}

	p.generation(1, 30)
	r = c.run("publish", nil, "publish", "--table", "orders", "--all")
	expect(t, "publish on a rolled-back table", r, 6)
	t.Logf("%s", lastLine(r.Stderr))
	for shard, trimmed := range last.Trimmed {
		w := st.Watermarks[shard]
		if w < trimmed && strings.Contains(r.Stderr, "latest watermark "+strconv.FormatUint(w, 10)) &&
			strings.Contains(r.Stderr, "trimmed-through position "+strconv.FormatUint(trimmed, 10)) {
			return // the refusal names both positions of a rolled-back shard
		}
	}
	t.Fatalf("the refusal does not name a watermark %v below its trimmed position %v: %s", st.Watermarks, last.Trimmed, r.Stderr)
}
