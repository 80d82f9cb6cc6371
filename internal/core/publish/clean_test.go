package publish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
)

// pauseBeforeLink makes the next link of version v by s's dataset wait:
// reached is closed when it gets there, and it links once resume is
// called (after its checks on the parent passed: a holder stalled in the
// middle of its commit). The test's end resumes it too.
func pauseBeforeLink(t *testing.T, s *Session, v uint64) (reached chan struct{}, resume func()) {
	t.Helper()
	ds, err := s.dataset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	ds.Hooks.BeforeLink = func(ctx context.Context, at uint64) error {
		if at == v {
			close(reached)
			<-release
		}
		return nil
	}
	resume = sync.OnceFunc(func() { close(release) })
	t.Cleanup(resume)
	return reached, resume
}

func waitReached(t *testing.T, reached chan struct{}, what string) {
	t.Helper()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		t.Fatalf("%s never reached its link", what)
	}
}

// revokeAndWait revokes the table's claim and waits until holder s knows.
func (e *env) revokeAndWait(s *Session) {
	e.t.Helper()
	if _, err := e.co.Revoke(e.ctx, coord.RevokeRequest{Table: "orders", Actor: "test", Reason: "deposed"}); err != nil {
		e.t.Fatal(err)
	}
	<-s.Claim().Done()
}

// cleaner is the publisher `table clean` runs as. ahead moves its clock
// forward: every version and file then looks older than the safe minimum,
// as they would to a clean run long after a holder was stopped (SIGSTOP)
// in the middle of its commit.
func (e *env) cleaner(ahead time.Duration) *Publisher {
	p := e.publisher("cleaner")
	if ahead > 0 {
		p.cfg.Clock = clocktesting.NewFakeClock(time.Now().Add(ahead))
	}
	return p
}

// checkCommitters checks every listed version of the table against who
// committed it (version → owner id; version 1, the creation, records none).
func (e *env) checkCommitters(want map[uint64]string) []uint64 {
	e.t.Helper()
	ds, err := lance.OpenStore(objstore.NewLocal(e.lance).Sub("orders.lance"))
	if err != nil {
		e.t.Fatal(err)
	}
	vs, err := ds.Versions()
	if err != nil {
		e.t.Fatal(err)
	}
	var listed []uint64
	for _, vi := range vs {
		listed = append(listed, vi.Version)
		m, err := ds.Manifest(vi.Version)
		if err != nil {
			e.t.Fatal(err)
		}
		c, _ := ParseCommitter(m.Config)
		st, _ := ParseState(m.Config)
		who, ok := want[vi.Version]
		by := fmt.Sprintf("%q", who)
		if !ok && vi.Version != 1 {
			by = "another holder, and the clean removed it"
		}
		if c.ID != who {
			e.t.Fatalf("version %d now: committer %q, epoch %d, %d rows; it was committed by %s (versions listed:%s)",
				vi.Version, c.ID, st.Epoch, m.Rows(), by, versionList(ds))
		}
	}
	return listed
}

func versionList(ds *lance.Dataset) string {
	vs, _ := ds.Versions()
	out := ""
	for _, v := range vs {
		out += fmt.Sprintf(" %d", v.Version)
	}
	return out
}

// checkFilesExist checks that every data file every listed version
// references exists.
func (e *env) checkFilesExist() {
	e.t.Helper()
	st := objstore.NewLocal(e.lance).Sub("orders.lance")
	ds, err := lance.OpenStore(st)
	if err != nil {
		e.t.Fatal(err)
	}
	vs, err := ds.Versions()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, vi := range vs {
		m, err := ds.Manifest(vi.Version)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, f := range m.Fragments {
			for _, df := range f.Files {
				if _, err := st.Stat(e.ctx, "data/"+df.Path); err != nil {
					c, _ := ParseCommitter(m.Config)
					e.t.Fatalf("version %d (committed by %q) references data/%s: %v", vi.Version, c.ID, df.Path, err)
				}
			}
		}
	}
}

type roundOut struct {
	res *Result
	err error
}

// staleHolder publishes versions 2 (fence) and 3 as "stale", then starts a
// round that passes its checks on parent 3 and stalls before linking 4;
// its claim is revoked, and "successor" fences at 4 and publishes the
// adopted plan as 5 (the scenario of issue 31 finding 2). It returns the
// stalled round's outcome channel, its resume, and whether its link of 4
// found the number free.
func (e *env) staleHolder() (<-chan roundOut, func(), *atomic.Bool) {
	e.t.Helper()
	e.produce(0, 3, 10)
	a, err := e.publisher("stale").Acquire(e.ctx, "orders")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = a.Release(context.Background()) })
	if r, err := a.Round(e.ctx); err != nil || r.Version != 3 {
		e.t.Fatalf("first round: %+v %v", r, err)
	}
	e.produce(0, 3, 10)
	reached, resume := pauseBeforeLink(e.t, a, 4)
	linked := &atomic.Bool{}
	a.ds.Hooks.AfterLinkBeforeDirSync = func(_ context.Context, v uint64) error {
		linked.Store(linked.Load() || v == 4)
		return nil
	}
	done := make(chan roundOut, 1)
	go func() {
		r, err := a.Round(e.ctx)
		done <- roundOut{r, err}
	}()
	waitReached(e.t, reached, "the stale holder's commit")
	e.revokeAndWait(a)
	b, err := e.publisher("successor").Acquire(e.ctx, "orders")
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := b.Round(e.ctx)
	_ = b.Release(e.ctx)
	if err != nil || r.Outcome != OutcomePublished || r.Version != 5 || !r.Adopted {
		e.t.Fatalf("successor round: %+v %v", r, err)
	}
	return done, resume, linked
}

// clean runs `table clean --older-than 0s` as the cleaner.
func (e *env) clean(p *Publisher) *CleanResult {
	e.t.Helper()
	c, err := p.Acquire(e.ctx, "orders")
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Release(context.Background())
	res, err := c.Clean(e.ctx, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// Issue 31 finding 2, as reported: a holder paused after its checks on
// parent 3, its claim revoked, the successor fenced at 4 and published 5,
// then `table clean --older-than 0s`. The clean fences (6) and keeps what
// a holder deposed within the claim TTL could still commit onto, so the
// stale link of 4 meets the successor's fence: the stale round is fenced
// out, and every version is still the one its committer made.
func TestCleanKeepsVersionsADeposedHolderCouldCommitOnto(t *testing.T) {
	e := newEnv(t, 1)
	done, resume, linked := e.staleHolder()
	res := e.clean(e.cleaner(0))
	resume()
	out := <-done
	listed := e.checkCommitters(map[uint64]string{2: "stale", 3: "stale", 4: "successor", 5: "successor", 6: "cleaner"})
	if !errors.Is(out.err, errs.ErrFenced) {
		t.Fatalf("stale round after the clean: %+v %v, want fenced (versions %v)", out.res, out.err, listed)
	}
	t.Logf("stale round: %v; clean removed versions %v", out.err, res.VersionsRemoved)
	if len(res.VersionsRemoved) != 0 || linked.Load() {
		t.Fatalf("clean removed %v (stale link of 4 made: %v): everything is younger than twice the claim TTL", res.VersionsRemoved, linked.Load())
	}
	e.checkFilesExist()
	e.exactlyOnce(e.tableIDs())
}

// The same, with the holder stalled far longer than any TTL (a SIGSTOP):
// by the clean's clock everything is old, so it removes versions 1..4
// (oldest first, never the latest two: 5 and its own fence 6) and 4's
// number is free when the stale holder links it. The commit finds its
// parent 3 gone, removes its manifest again and loses: no numbered
// version holds a fenced owner's data.
func TestStaleCommitIntoVersionFreedByCleanIsUndone(t *testing.T) {
	e := newEnv(t, 1)
	done, resume, linked := e.staleHolder()
	res := e.clean(e.cleaner(time.Hour))
	resume()
	out := <-done
	listed := e.checkCommitters(map[uint64]string{5: "successor", 6: "cleaner"})
	if !errors.Is(out.err, errs.ErrFenced) {
		t.Fatalf("stale round after the clean: %+v %v, want fenced (versions %v)", out.res, out.err, listed)
	}
	t.Logf("stale round: %v; clean removed versions %v", out.err, res.VersionsRemoved)
	if fmt.Sprint(res.VersionsRemoved) != "[1 2 3 4]" || fmt.Sprint(listed) != "[5 6]" || !linked.Load() {
		t.Fatalf("clean removed %v, versions now %v, stale link of 4 made: %v; want 1..4 removed, 5 and 6 kept, the link made and undone", res.VersionsRemoved, listed, linked.Load())
	}
	e.checkFilesExist()
	e.exactlyOnce(e.tableIDs())
}

// Issue 31, also found: a compactor that passed its epoch check and
// stalled before its link, deposed; a clean (long after, by its clock)
// removes the compactor's new file, unreferenced yet. The clean fences
// first, so the compactor's Rewrite meets the fence's version and is never
// committed: no version references a removed file.
func TestCleanFencesADeposedCompactor(t *testing.T) {
	e := newEnv(t, 1)
	w, err := e.publisher("worker").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // versions 3, 4, 5: three small files
		e.produce(0, 1, 10)
		if _, err := w.Round(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Release(e.ctx)
	k, err := e.publisher("compactor").Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(context.Background())
	reached, resume := pauseBeforeLink(t, k, 7) // 6 is its fence, 7 its Rewrite
	done := make(chan error, 1)
	var groups []CompactGroup
	go func() {
		r, err := k.Compact(e.ctx, 1<<20)
		if r != nil {
			groups = r.Groups
		}
		done <- err
	}()
	waitReached(t, reached, "the compactor's Rewrite")
	e.revokeAndWait(k)
	res := e.clean(e.cleaner(time.Hour))
	resume()
	err = <-done
	e.checkFilesExist()
	if !errors.Is(err, errs.ErrFenced) || len(groups) != 0 {
		t.Fatalf("deposed compactor after the clean: groups %+v, err %v", groups, err)
	}
	e.checkCommitters(map[uint64]string{6: "compactor", 7: "cleaner"})
	t.Logf("deposed compactor: %v; clean removed versions %v and %d file(s)", err, res.VersionsRemoved, len(res.FilesRemoved))
	if len(res.FilesRemoved) == 0 {
		t.Fatal("the clean removed no file: the compactor's unreferenced file was not old enough, the test proves nothing")
	}
	e.exactlyOnce(e.tableIDs())
}
