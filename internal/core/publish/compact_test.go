package publish

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
)

// acquireRetry takes the table's claim, waiting while another holds it.
func acquireRetry(t *testing.T, ctx context.Context, p *Publisher) *Session {
	t.Helper()
	for {
		s, err := p.Acquire(ctx, "orders")
		if err == nil {
			return s
		}
		if !errors.Is(err, coord.ErrClaimed) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 17: `table compact` under a racing worker. The worker produces and
// publishes in its own claim slices while compactions merge the small
// files under theirs: every compaction version keeps its parent's
// watermarks and carries the compactor's fenced epoch, and the official
// reader finds every ACKed record exactly once, nothing else.
func TestCompactUnderRacingWorker(t *testing.T) {
	o := oracletest.MustFind(t)
	e := newEnv(t, 2)
	worker, compactor := e.publisher("worker"), e.publisher("compactor")
	e.produce(0, 3, 30)
	first := acquireRetry(t, e.ctx, worker)
	drain(t, e.ctx, first)
	_ = first.Release(e.ctx)
	var mu sync.Mutex // e.acked and e.gen belong to the producing goroutine
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			e.produce(i%2, 2, 30)
			mu.Unlock()
			s := acquireRetry(t, e.ctx, worker)
			drain(t, e.ctx, s)
			_ = s.Release(e.ctx)
		}
	}()
	ds, err := lance.Open(filepath.Join(e.lance, "orders.lance"))
	if err != nil {
		t.Fatal(err)
	}
	var groups int
	for round := 0; round < 6; round++ {
		time.Sleep(150 * time.Millisecond) // let the worker publish small files between compactions
		s := acquireRetry(t, e.ctx, compactor)
		res, err := s.Compact(e.ctx, 1<<20)
		_ = s.Release(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range res.Groups {
			checkCompaction(t, ds, g, res.Epoch)
		}
		groups += len(res.Groups)
	}
	close(stop)
	<-done
	s := acquireRetry(t, e.ctx, worker)
	drain(t, e.ctx, s)
	_ = s.Release(e.ctx)
	if groups == 0 {
		t.Fatal("no compaction merged anything")
	}
	e.exactlyOnce(e.tableIDs())
	d, err := o.Dump(e.ctx, filepath.Join(e.lance, "orders.lance"), oracle.DumpOptions{Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, raw := range d.Columns["id"] {
		id, err := oracle.ParseInt64(raw)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	e.exactlyOnce(ids)
	t.Logf("%d compaction groups, %d rows", groups, len(ids))
}

// checkCompaction checks one compaction version against its parent:
// watermarks and plan unchanged, the compactor's epoch, fewer fragments.
func checkCompaction(t *testing.T, ds *lance.Dataset, g CompactGroup, epoch uint64) {
	t.Helper()
	m, err := ds.Manifest(g.Version)
	if err != nil {
		t.Fatal(err)
	}
	parent, err := ds.Manifest(g.Version - 1)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := ParseState(m.Config)
	pst, _ := ParseState(parent.Config)
	if !st.Watermarks.Equal(pst.Watermarks) || st.Plan != pst.Plan || st.Epoch != epoch || pst.Epoch != epoch {
		t.Fatalf("compaction version %d: state %+v, parent %+v, compactor epoch %d", g.Version, st, pst, epoch)
	}
	if len(m.Fragments) != len(parent.Fragments)-len(g.Replaced)+1 || m.Rows() != parent.Rows() {
		t.Fatalf("compaction version %d: %d fragments (%d rows) from %d (%d rows), replaced %v",
			g.Version, len(m.Fragments), m.Rows(), len(parent.Fragments), parent.Rows(), g.Replaced)
	}
	txn, ok, err := m.Transaction(ds.Store())
	if err != nil || !ok || txn.Operation != "rewrite" {
		t.Fatalf("compaction version %d transaction %+v %v %v", g.Version, txn, ok, err)
	}
}
