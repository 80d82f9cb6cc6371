package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/budget"
	"github.com/walctl/walctl/internal/core/lance/lancefile"
)

// publisherWith is e.publisher with its Config adjusted by mod.
func (e *env) publisherWith(owner string, mod func(*Config)) *Publisher {
	p := e.publisher(owner)
	mod(&p.cfg)
	return p
}

func streamedMode(b *budget.Budget) func(*Config) {
	return func(c *Config) { c.PipelinePreparation, c.Budget = true, b }
}

// idle asserts that every permit and every budget byte is back.
func idle(t *testing.T, p *Publisher) {
	t.Helper()
	if n := p.cfg.Permits.InUse(); n != 0 {
		t.Fatalf("%d fetch/decode permits still held", n)
	}
	if n := p.cfg.Budget.Reserved(); n != 0 {
		t.Fatalf("%d budget bytes still reserved", n)
	}
}

func TestStreamedRoundsPublishEveryEntryOnce(t *testing.T) {
	e := newEnv(t, 3)
	e.produce(0, 30, 100)
	e.produce(1, 12, 80)
	e.produce(2, 25, 120)
	// A budget that fits two writers' workspace and a few entries: the
	// others wait for admission and bytes, none deadlocks.
	p := e.publisherWith("w", streamedMode(budget.New(2*workspaceBound+2<<20)))
	s, err := p.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	res := drain(t, e.ctx, s)
	if res[0].Outcome != OutcomePublished || len(res[0].Files) < 4 {
		t.Fatalf("first round: %+v", res[0])
	}
	e.exactlyOnce(e.tableIDs())
	idle(t, p)
}

// readFile decodes every column of a data file.
func readFile(t *testing.T, root, rel string, s *Session) []string {
	t.Helper()
	m, err := s.ds.Latest()
	if err != nil {
		t.Fatal(err)
	}
	schema, err := m.Schema()
	if err != nil {
		t.Fatal(err)
	}
	f, err := lancefile.OpenFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	for i, fld := range schema.Arrow.Fields() {
		arr, err := f.ReadColumn(i, fld.Name, fld.Type, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, arr.String())
		arr.Release()
	}
	return out
}

// For the same pinned plan both modes write files covering the same WAL
// ranges with the same decoded content; only the names differ.
func TestBothModesWriteTheSameFilesForAPlan(t *testing.T) {
	e := newEnv(t, 2)
	e.produce(0, 25, 100)
	e.produce(1, 9, 70)
	p := e.publisher("w")
	s, err := p.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	res, err := s.Prepare(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	attempts, err := s.store.Attempts(res.Plan)
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts: %v %v", attempts, err)
	}
	buffered := attempts[0]
	plans, err := s.store.Plans()
	if err != nil || len(plans) != 1 {
		t.Fatalf("plans: %v %v", plans, err)
	}
	p.cfg.PipelinePreparation = true
	streamed, err := s.prepare(e.ctx, plans[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(buffered.Files) < 3 || len(streamed.Files) != len(buffered.Files) {
		t.Fatalf("buffered %d files, streamed %d", len(buffered.Files), len(streamed.Files))
	}
	root := filepath.Join(e.lance, "orders.lance")
	for i, b := range buffered.Files {
		st := streamed.Files[i]
		if b.Range != st.Range || b.Descriptor.Rows != st.Descriptor.Rows || b.Descriptor.Path == st.Descriptor.Path {
			t.Fatalf("file %d: buffered %+v, streamed %+v", i, b, st)
		}
		bc, sc := readFile(t, root, b.Descriptor.Path, s), readFile(t, root, st.Descriptor.Path, s)
		for c := range bc {
			if bc[c] != sc[c] {
				t.Fatalf("file %d column %d differs between modes", i, c)
			}
		}
	}
	idle(t, p)
	drain(t, e.ctx, s)
	e.exactlyOnce(e.tableIDs())
}

// An injected stream failure mid-plan cancels the other writers (they
// observe the cancellation); a decode blocked at that moment keeps its
// permit until it returns; the error comes back only after every admitted
// writer finished; no descriptor set is recorded; the next round publishes
// the same plan.
func TestStreamFailureJoinsAdmittedWritersAndRecordsNothing(t *testing.T) {
	e := newEnv(t, 2)
	e.produce(0, 40, 100)
	e.produce(1, 40, 100)
	p := e.publisherWith("w", streamedMode(budget.New(256<<20)))
	injected := errors.New("injected stream failure")
	var (
		mu             sync.Mutex
		started, done  int
		returned       bool
		doneAfterRet   bool
		blocked        = make(chan struct{})
		unblock        = make(chan struct{})
		blockOnce      sync.Once
		permitsBlocked int
	)
	p.cfg.hooks = &prepareHooks{
		decoding: func(_ context.Context, file int, pos uint64) {
			if file == 2 {
				blockOnce.Do(func() {
					close(blocked)
					<-unblock // a decode stuck in I/O: it ignores ctx
				})
			}
		},
		fetched: func(ctx context.Context, file int, pos uint64) error {
			if file != 1 {
				return nil
			}
			select {
			case <-blocked:
			case <-time.After(30 * time.Second):
				t.Error("file 2's decode never started")
			}
			return injected
		},
		writerStart: func(int) { mu.Lock(); started++; mu.Unlock() },
		writerDone: func(file int, err error) {
			if file == 0 {
				time.Sleep(100 * time.Millisecond) // a slow writer: the round must wait for it
			}
			mu.Lock()
			done++
			doneAfterRet = doneAfterRet || returned
			mu.Unlock()
		},
	}
	s, err := p.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	type out struct {
		res *Result
		err error
	}
	ch := make(chan out, 1)
	go func() { r, err := s.Round(e.ctx); ch <- out{r, err} }()
	<-blocked
	time.Sleep(200 * time.Millisecond) // the failure has cancelled the plan by now
	select {
	case o := <-ch:
		t.Fatalf("round returned while a decode was still blocked: %+v %v", o.res, o.err)
	default:
	}
	permitsBlocked = p.cfg.Permits.InUse()
	close(unblock)
	o := <-ch
	mu.Lock()
	returned = true
	mu.Unlock()
	if !errors.Is(o.err, injected) {
		t.Fatalf("round: %v, want the injected failure", o.err)
	}
	if permitsBlocked < 1 {
		t.Fatalf("the blocked decode held no permit through cancellation")
	}
	mu.Lock()
	if started < 3 || done != started || doneAfterRet {
		t.Fatalf("admitted %d writers, %d finished before the error was returned (late: %v)", started, done, doneAfterRet)
	}
	mu.Unlock()
	idle(t, p)
	attempts, err := s.store.Attempts(o.res.Plan)
	if err != nil || len(attempts) != 0 {
		t.Fatalf("a descriptor set was recorded after the failure: %v %v", attempts, err)
	}

	p.cfg.hooks = nil
	res, err := s.Round(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OutcomePublished || res.Plan != o.res.Plan || !res.Adopted {
		t.Fatalf("next round: %+v (failed plan %s)", res, o.res.Plan)
	}
	drain(t, e.ctx, s)
	e.exactlyOnce(e.tableIDs())
	idle(t, p)
}

// Files of a prepared-but-unpublished streamed result deleted before
// publish are detected, prepared again, and nothing is published twice.
func TestStreamedDeletedPreparedFilesArePreparedAgain(t *testing.T) {
	e := newEnv(t, 2)
	e.produce(0, 20, 100)
	e.produce(1, 5, 50)
	p := e.publisherWith("a", streamedMode(budget.New(128<<20)))
	s, err := p.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	prep, err := s.Prepare(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.lance, "orders.lance", prep.Files[len(prep.Files)-1])); err != nil {
		t.Fatal(err)
	}
	res, err := s.Round(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused || res.Attempt == prep.Attempt || res.Plan != prep.Plan || res.Outcome != OutcomePublished {
		t.Fatalf("damaged attempt reused or plan changed: %+v (prepared %+v)", res, prep)
	}
	old := map[string]bool{}
	for _, f := range prep.Files {
		old[f] = true
	}
	for _, f := range res.Files {
		if old[f] {
			t.Fatalf("published a file of the damaged attempt: %s", f)
		}
	}
	drain(t, e.ctx, s)
	e.exactlyOnce(e.tableIDs())
}

// A single entry that cannot fit the budget beside its writer's workspace
// is a clear error in both modes, never a wait.
func TestEntryLargerThanBudgetIsAnError(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(map[bool]string{false: "buffered", true: "streamed"}[streamed], func(t *testing.T) {
			e := newEnv(t, 1)
			e.produce(0, 3, 2000)
			p := e.publisherWith("w", func(c *Config) {
				c.PipelinePreparation, c.Budget = streamed, budget.New(workspaceBound+4096)
			})
			s, err := p.Acquire(e.ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release(context.Background())
			ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
			defer cancel()
			_, err = s.Round(ctx)
			// Streamed, files are prepared at once: whichever entry is met
			// first is named.
			if !errors.Is(err, budget.ErrTooLarge) || !regexp.MustCompile(`WAL entry [1-3] of shard 0 needs`).MatchString(err.Error()) || ctx.Err() != nil {
				t.Fatalf("round: %v, want ErrTooLarge naming the entry", err)
			}
			idle(t, p)
		})
	}
}

// Buffered preparation fetches one file's entries while another file is
// being written: file 0's fetch does not finish until file 1's writer has
// started, and never do more than BufferedFiles writers hold a slot at once
// (a writer gives its slot back before its file's fsync, so a third may be
// admitted while the first still syncs: CI's slow disk showed it).
func TestBufferedPreparationWritesTwoFilesAtOnce(t *testing.T) {
	e := newEnv(t, 2)
	e.produce(0, 30, 100)
	e.produce(1, 30, 100)
	p := e.publisher("w")
	var (
		mu            sync.Mutex
		active, most  int
		secondStarted = make(chan struct{})
		once          sync.Once
	)
	p.cfg.hooks = &prepareHooks{
		fetched: func(ctx context.Context, file int, pos uint64) error {
			if file != 0 {
				return nil
			}
			select {
			case <-secondStarted:
				return nil
			case <-time.After(30 * time.Second):
				return errors.New("no second file was admitted while the first was being fetched")
			}
		},
		writerStart: func(file int) {
			mu.Lock()
			active++
			most = max(most, active)
			mu.Unlock()
			if file == 1 {
				once.Do(func() { close(secondStarted) })
			}
		},
		writerFreed: func(int) { mu.Lock(); active--; mu.Unlock() },
	}
	s, err := p.Acquire(e.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	res := drain(t, e.ctx, s)
	if res[0].Outcome != OutcomePublished || len(res[0].Files) < 3 {
		t.Fatalf("first round: %+v", res[0])
	}
	if most != DefaultBufferedFiles {
		t.Fatalf("at most %d writers held a slot at once, want %d", most, DefaultBufferedFiles)
	}
	e.exactlyOnce(e.tableIDs())
	idle(t, p)
}
