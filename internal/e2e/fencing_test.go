package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// fp is the WALCTL_FAILPOINTS entry of a process's environment.
func fp(spec ...string) []string {
	return []string{failpoint.EnvSpec + "=" + strings.Join(spec, ";")}
}

// at is "name=action@version" for the manifest-link points, whose argument
// is the version being linked.
func at(name, action string, v uint64) string {
	return fmt.Sprintf("%s=%s@%d", name, action, v)
}

// dataCommitVersion is the version a publisher started now will link for
// its first data commit: it fences the latest version first.
func (c *cluster) dataCommitVersion(table string) uint64 { return c.latestVersion(table) + 2 }

type fileID struct {
	ino   uint64
	size  int64
	mtime time.Time
}

// statFiles identifies the table's files (paths relative to the dataset).
func (c *cluster) statFiles(table string, files []string) map[string]fileID {
	c.t.Helper()
	out := map[string]fileID{}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(c.tablePath(table), f))
		if err != nil {
			c.t.Fatal(err)
		}
		out[f] = fileID{ino: fi.Sys().(*syscall.Stat_t).Ino, size: fi.Size(), mtime: fi.ModTime()}
	}
	return out
}

// pinnedPlans are the ids of the table's pinned (unretired) plans.
func (c *cluster) pinnedPlans(table string) []string {
	c.t.Helper()
	dir := filepath.Join(c.tablePath(table), "_walctl", "plans")
	entries, err := os.ReadDir(dir)
	if err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			c.t.Fatal(err)
		}
		var p publish.Plan
		if err := json.Unmarshal(b, &p); err != nil {
			c.t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	return ids
}

func (c *cluster) revoke(table string) {
	c.t.Helper()
	expect(c.t, "claim revoke "+table, c.run("revoke", nil, "claim", "revoke", table, "--reason", "e2e handover"), exitOK)
}

// tableEpoch is the publisher epoch the table's latest version carries.
func (c *cluster) tableEpoch(table string) uint64 {
	c.t.Helper()
	ms := c.manifests(table)
	e, err := strconv.ParseUint(ms[uint64(len(ms))].config[publish.KeyEpoch], 10, 64)
	if err != nil {
		c.t.Fatal(err)
	}
	return e
}

// noDataAtEpoch checks that no version that added rows carries epoch e:
// the owner of e published nothing (its own fence may be there).
func (c *cluster) noDataAtEpoch(table string, e uint64) {
	c.t.Helper()
	ms := c.manifests(table)
	for v, m := range ms {
		if m.config[publish.KeyEpoch] == strconv.FormatUint(e, 10) && m.rows > ms[v-1].rows {
			c.t.Fatalf("version %d of %s adds rows at the fenced-out epoch %d", v, table, e)
		}
	}
}

// noVersionAtEpoch checks that no version of the table carries epoch e.
func (c *cluster) noVersionAtEpoch(table string, e uint64) {
	c.t.Helper()
	for v, m := range c.manifests(table) {
		if m.config[publish.KeyEpoch] == strconv.FormatUint(e, 10) {
			c.t.Fatalf("version %d of %s carries the fenced-out epoch %d", v, table, e)
		}
	}
}

// The seed's scenario: A0 prepares a real publication and exits; A adopts it
// and is paused just before linking its commit; the claim is revoked; the
// successor B acquires a newer epoch and publishes, reusing exactly A0's
// files; A, resumed, is fenced and publishes nothing. Then two competing
// publishers publish the rest. All columns are compared.
func TestSeedRevokedPublisherFencedSuccessorReusesFiles(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTable("orders")
	p := c.producer("orders", 1)
	p.generation(4, 50)
	p.generation(4, 50)

	r := c.run("A0-prepare", nil, "prepare", "--table", "orders")
	expect(t, "A0 prepare", r, exitOK)
	a0 := parseSummary(t, r)
	if len(a0.Rounds) != 1 || a0.Rounds[0].Outcome != publish.OutcomePrepared || len(a0.Rounds[0].Files) == 0 {
		t.Fatalf("A0 prepare: %s", r.Stdout)
	}
	prepared := a0.Rounds[0]
	files := c.statFiles("orders", prepared.Files)

	v := c.dataCommitVersion("orders")
	a := c.walctl("A-publish", fp(at(failpoint.BeforeManifestLink, "pause", v)), "publish", "--table", "orders")
	a.WaitPaused(failpoint.BeforeManifestLink)
	epochA := c.walEpoch("orders")
	c.revoke("orders")

	r = c.run("B-publish", nil, "publish", "--table", "orders", "--all")
	expect(t, "B publish --all", r, exitOK)
	b := parseSummary(t, r)
	if b.Epoch <= epochA {
		t.Fatalf("successor epoch %d, old owner's %d", b.Epoch, epochA)
	}
	if len(b.published()) != 1 || b.Rounds[0].Outcome != publish.OutcomePublished {
		t.Fatalf("B should publish A0's plan in its first round, and only it: %s", r.Stdout)
	}
	got := b.Rounds[0]
	if got.Plan != prepared.Plan || !got.Adopted || !got.Reused || got.Attempt != prepared.Attempt || !slices.Equal(got.Files, prepared.Files) {
		t.Fatalf("B did not reuse A0's prepared result:\nA0: %+v\nB:  %+v", prepared, got)
	}
	if now := c.statFiles("orders", prepared.Files); !mapsEqual(now, files) {
		t.Fatalf("prepared files were rewritten:\nbefore %v\nafter  %v", files, now)
	}
	if commits := c.dataCommitsOf("orders", prepared.Plan); len(commits) != 1 || commits[0] != got.Version {
		t.Fatalf("plan %s committed in versions %v, B reports %d", prepared.Plan, commits, got.Version)
	}
	latest := c.latestVersion("orders")

	a.Resume(failpoint.BeforeManifestLink)
	ra := a.Wait()
	expect(t, "old owner A after resume", ra, exitConflict)
	if l := c.latestVersion("orders"); l != latest {
		t.Fatalf("fenced A changed the table: latest version %d, was %d\n%s", l, latest, ra.Stderr)
	}
	c.noDataAtEpoch("orders", epochA)
	if e := c.tableEpoch("orders"); e != b.Epoch {
		t.Fatalf("table fenced at %d, B's epoch is %d", e, b.Epoch)
	}
	// Refused as fenced at its commit, not after taking B's publication of
	// the same plan for its own and being stopped only by the WAL at trim.
	if strings.Contains(ra.Stderr, "trim") {
		t.Fatalf("fenced A went on to trim:\n%s", ra.Stderr)
	}
	t.Logf("fenced A: %s", lastLine(ra.Stderr))
	p.exactlyOnce()
	p.allColumnsMatch()

	// Two competing publishers on fresh work: each publishes or is refused
	// while the other holds the claim; together they publish everything.
	p.generation(3, 40)
	p.generation(3, 40)
	x := c.walctl("X-publish", nil, "publish", "--table", "orders", "--all")
	y := c.walctl("Y-publish", nil, "publish", "--table", "orders", "--all")
	rx, ry := x.Wait(), y.Wait()
	for _, rr := range []proc.Result{rx, ry} {
		if rr.Code != exitOK && rr.Code != exitConflict {
			t.Fatalf("competing publisher: %s", rr)
		}
	}
	if rx.Code != exitOK && ry.Code != exitOK {
		t.Fatalf("neither competing publisher succeeded:\n%s\n%s", rx, ry)
	}
	r = c.run("final-publish", nil, "publish", "--table", "orders", "--all")
	expect(t, "final publish --all", r, exitOK)
	if f := parseSummary(t, r); len(f.published()) != 0 {
		t.Fatalf("competing publishers left work behind: %s", r.Stdout)
	}
	p.exactlyOnce()
	p.allColumnsMatch()
	c.trimmedToWatermarks("orders")
}

// trimmedToWatermarks checks that the WAL trimmed every shard through the
// table's watermark and no further (rule 9), with all work published.
func (c *cluster) trimmedToWatermarks(table string) {
	c.t.Helper()
	ms := c.manifests(table)
	st, err := publish.ParseState(ms[uint64(len(ms))].config)
	if err != nil {
		c.t.Fatal(err)
	}
	stats, err := c.wal.Stats(c.ctx, table, st.Watermarks)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, sh := range stats.Shards {
		if sh.PendingGenerations != 0 || st.Watermarks[sh.Shard] != sh.LastPosition || sh.TrimmedThrough != sh.LastPosition {
			c.t.Fatalf("shard %d: watermark %d, trimmed through %d, last position %d, %d generations pending",
				sh.Shard, st.Watermarks[sh.Shard], sh.TrimmedThrough, sh.LastPosition, sh.PendingGenerations)
		}
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// (a) The old owner is paused after its WAL-epoch check, before its link;
// the successor fences and publishes; the old owner, resumed, is refused.
func TestOldOwnerPausedAfterWALEpochCheckIsRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTable("orders")
	p := c.producer("orders", 2)
	p.generation(3, 50)
	p.generation(3, 50)

	a := c.walctl("A-publish", fp(failpoint.AfterWALEpochCheck+"=pause"), "publish", "--table", "orders")
	a.WaitPaused(failpoint.AfterWALEpochCheck)
	epochA := c.walEpoch("orders")
	plans := c.pinnedPlans("orders")
	if len(plans) != 1 {
		t.Fatalf("pinned plans while A is paused: %v", plans)
	}
	c.revoke("orders")

	r := c.run("B-publish", nil, "publish", "--table", "orders", "--all")
	expect(t, "B publish --all", r, exitOK)
	b := parseSummary(t, r)
	pub := b.published()
	if len(pub) != 1 || pub[0].Plan != plans[0] || !pub[0].Adopted || !pub[0].Reused {
		t.Fatalf("B should adopt A's plan %s and reuse its files: %s", plans[0], r.Stdout)
	}
	latest := c.latestVersion("orders")

	a.Resume(failpoint.AfterWALEpochCheck)
	ra := a.Wait()
	expect(t, "old owner A after resume", ra, exitConflict)
	if l := c.latestVersion("orders"); l != latest {
		t.Fatalf("fenced A changed the table: latest %d, was %d", l, latest)
	}
	c.noDataAtEpoch("orders", epochA)
	t.Logf("fenced A: %s", lastLine(ra.Stderr))
	if commits := c.dataCommitsOf("orders", plans[0]); len(commits) != 1 {
		t.Fatalf("plan %s committed in versions %v", plans[0], commits)
	}
	p.exactlyOnce()
}

// (b) The old owner's commit lands just before the successor's fence: the
// successor fences on top, finds the old owner's plan published, retires it
// and publishes only the rest.
func TestOldOwnersCommitLandsBeforeSuccessorsFence(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTable("orders")
	p := c.producer("orders", 3)
	p.generation(3, 50)
	p.generation(3, 50)
	firstRows := len(p.acked)

	// A is paused before linking its data commit, and again once it is
	// linked (so its plan is still pinned when B looks).
	v := c.dataCommitVersion("orders")
	a := c.walctl("A-publish", fp(at(failpoint.BeforeManifestLink, "pause", v), at(failpoint.AfterLinkBeforeDirSync, "pause", v)),
		"publish", "--table", "orders")
	a.WaitPaused(failpoint.BeforeManifestLink)
	plans := c.pinnedPlans("orders")
	if len(plans) != 1 {
		t.Fatalf("pinned plans while A is paused: %v", plans)
	}
	planA := plans[0]
	c.revoke("orders")

	// More work arrives; B advances the WAL epoch and stops before fencing.
	p.generation(2, 30)
	b := c.walctl("B-publish", fp(failpoint.AfterEpochAdvance+"=pause"), "publish", "--table", "orders", "--all")
	b.WaitPaused(failpoint.AfterEpochAdvance)
	epochA, epochB := c.walEpoch("orders")-1, c.walEpoch("orders")
	// B has advanced the WAL epoch and not yet recorded it in its claim:
	// it is the newer publisher, not one that can no longer commit.
	if e := c.epochShow("orders"); e.WALEpoch != epochB || e.FenceEpoch == nil || *e.FenceEpoch != epochA || !e.OK ||
		!strings.Contains(e.Verdict, "taking over") {
		t.Fatalf("epoch show while B has advanced the WAL epoch, not fenced yet: %+v", e)
	} else {
		t.Logf("epoch show, B advanced, not fenced: %s", e.Verdict)
	}

	// A's commit lands: its epoch still equals the table's fence.
	a.Resume(failpoint.BeforeManifestLink)
	a.WaitPaused(failpoint.AfterLinkBeforeDirSync)
	if commits := c.dataCommitsOf("orders", planA); len(commits) != 1 || commits[0] != v {
		t.Fatalf("A's plan %s committed in versions %v, want [%d]", planA, commits, v)
	}

	b.Resume(failpoint.AfterEpochAdvance)
	rb := b.Wait()
	expect(t, "B publish --all", rb, exitOK)
	sb := parseSummary(t, rb)
	if sb.Epoch != epochB {
		t.Fatalf("B's epoch %d, WAL had %d", sb.Epoch, epochB)
	}
	var rows uint64
	for _, r := range sb.published() {
		if r.Plan == planA {
			t.Fatalf("B published A's plan again: %s", rb.Stdout)
		}
		rows += r.Rows
	}
	if want := uint64(len(p.acked) - firstRows); rows != want {
		t.Fatalf("B published %d rows, only the %d rows after A's plan were left: %s", rows, want, rb.Stdout)
	}
	if _, err := os.Stat(filepath.Join(c.tablePath("orders"), "_walctl", "plans", "retired", planA+".json")); err != nil {
		t.Fatalf("A's published plan was not retired: %v", err)
	}
	if !strings.Contains(rb.Stderr, "retired stale plan") || !strings.Contains(rb.Stderr, planA) {
		t.Fatalf("B does not say it retired A's plan %s:\n%s", planA, rb.Stderr)
	}
	if e := c.tableEpoch("orders"); e != epochB {
		t.Fatalf("table fenced at %d, want B's %d (A had %d)", e, epochB, epochA)
	}
	latest := c.latestVersion("orders")

	a.Resume(failpoint.AfterLinkBeforeDirSync)
	ra := a.Wait()
	if ra.Code != exitOK && ra.Code != exitConflict {
		t.Fatalf("A after its commit landed: %s", ra)
	}
	t.Logf("A (commit landed, then fenced out of its trim) exited %d", ra.Code)
	if l := c.latestVersion("orders"); l != latest {
		t.Fatalf("A changed the table after B: latest %d, was %d", l, latest)
	}
	if commits := c.dataCommitsOf("orders", planA); len(commits) != 1 {
		t.Fatalf("A's plan %s committed in versions %v", planA, commits)
	}
	if e := c.epochShow("orders"); e.ClaimEpoch != nil || e.FenceEpoch == nil || *e.FenceEpoch != epochB || e.WALEpoch != epochB || !e.OK {
		t.Fatalf("epoch show at the end: %+v", e)
	}
	p.exactlyOnce()
}

// epochRow is one row of `walctl epoch show --output json`.
type epochRow struct {
	Table      string  `json:"table"`
	WALEpoch   uint64  `json:"wal_epoch"`
	ClaimEpoch *uint64 `json:"claim_epoch"`
	FenceEpoch *uint64 `json:"fence_epoch"`
	Verdict    string  `json:"verdict"`
	OK         bool    `json:"ok"`
}

func (c *cluster) epochShow(table string) epochRow {
	c.t.Helper()
	r := c.run("epoch-show", nil, "epoch", "show", table)
	expect(c.t, "epoch show", r, exitOK)
	var rows []epochRow
	if err := json.Unmarshal([]byte(r.Stdout), &rows); err != nil || len(rows) != 1 {
		c.t.Fatalf("epoch show: %v\n%s", err, r.Stdout)
	}
	return rows[0]
}

// (c) An older owner's fence arriving after the successor's fence is
// refused: the old owner paused after advancing the WAL epoch, and paused
// just before linking its fence.
func TestOlderOwnersFenceAfterSuccessorsFenceIsRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTable("orders")
	p := c.producer("orders", 4)
	p.generation(2, 50)
	// The table exists and is fenced once, so both cases start from a
	// known latest version.
	expect(t, "initial publish", c.run("publish", nil, "publish", "--table", "orders", "--all"), exitOK)

	cases := []struct {
		name  string
		point string
		spec  func() string
	}{
		{"after-epoch-advance", failpoint.AfterEpochAdvance, func() string { return failpoint.AfterEpochAdvance + "=pause" }},
		{"before-fence-link", failpoint.BeforeManifestLink, func() string {
			return at(failpoint.BeforeManifestLink, "pause", c.latestVersion("orders")+1)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := c.forT(t)
			p.c = c
			p.generation(2, 40)
			a := c.walctl("A-publish", fp(tc.spec()), "publish", "--table", "orders", "--all")
			a.WaitPaused(tc.point)
			epochA := c.walEpoch("orders")
			c.revoke("orders")

			r := c.run("B-publish", nil, "publish", "--table", "orders", "--all")
			expect(t, "B publish --all", r, exitOK)
			b := parseSummary(t, r)
			if b.Epoch <= epochA || len(b.published()) == 0 {
				t.Fatalf("B (epoch %d, A had %d) should fence and publish: %s", b.Epoch, epochA, r.Stdout)
			}
			latest := c.latestVersion("orders")

			a.Resume(tc.point)
			ra := a.Wait()
			expect(t, "old owner A after resume", ra, exitConflict)
			if l := c.latestVersion("orders"); l != latest {
				t.Fatalf("fenced A changed the table: latest %d, was %d", l, latest)
			}
			c.noVersionAtEpoch("orders", epochA)
			t.Logf("fenced A: %s", lastLine(ra.Stderr))
			if e := c.tableEpoch("orders"); e != b.Epoch {
				t.Fatalf("table fenced at %d, want B's %d", e, b.Epoch)
			}
			p.exactlyOnce()
		})
	}
}

// (d) An error injected after a successful link makes the commit's outcome
// unknown; the publisher resolves it by finding its plan id in the table,
// without a second commit.
func TestUnknownOutcomeAfterLinkResolvedWithoutSecondCommit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTable("orders")
	p := c.producer("orders", 5)
	p.generation(3, 50)
	p.generation(3, 50)

	v := c.dataCommitVersion("orders")
	r := c.run("publish", fp(at(failpoint.AfterLinkBeforeDirSync, "error", v)+"*1"), "publish", "--table", "orders", "--all")
	expect(t, "publish --all with an unknown commit outcome", r, exitOK)
	s := parseSummary(t, r)
	pub := s.published()
	if len(pub) == 0 || pub[0].Version != v {
		t.Fatalf("first round should report version %d: %s", v, r.Stdout)
	}
	if !strings.Contains(r.Stderr, "commit resolved by the plan id") || !strings.Contains(r.Stderr, "injected error") {
		t.Fatalf("the injected unknown outcome was not resolved by the plan id:\n%s", r.Stderr)
	}
	for _, round := range pub {
		if commits := c.dataCommitsOf("orders", round.Plan); len(commits) != 1 || commits[0] != round.Version {
			t.Fatalf("plan %s committed in versions %v, reported %d", round.Plan, commits, round.Version)
		}
	}
	p.exactlyOnce()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
