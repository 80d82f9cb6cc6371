package catchup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/failpoint"
)

// campaign wins a term for id on s within the test's deadline.
func (e *env) campaign(s *catchup.Store, id string) *catchup.Term {
	e.t.Helper()
	term, err := s.Campaign(e.ctx, catchup.LeaderConfig{ID: id, URL: "http://" + id, TTL: 5 * time.Second, Clock: e.clock})
	if err != nil {
		e.t.Fatalf("campaign %s: %v", id, err)
	}
	e.t.Cleanup(func() { _ = term.Resign(context.Background()) })
	return term
}

func refused(reg *prometheus.Registry, by string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "walctl_catchup_leader_refused_writes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == by {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// Two masters campaign: one leads, the other waits until the first
// resigns; the resigned leader's next write is refused by its own check
// (its term ended), the successor's writes land.
func TestOneLeaderAtATimeAndAResignedLeaderCannotWrite(t *testing.T) {
	e := newEnv(t, nil)
	b := e.startMaster(e.policy)
	reg := prometheus.NewRegistry()
	ta := e.campaign(e.store.WithMetrics(catchup.NewMetrics(reg)), "a")

	// b cannot win while a leads.
	ctx, cancel := context.WithTimeout(e.ctx, 300*time.Millisecond)
	_, err := b.store.Campaign(ctx, catchup.LeaderConfig{ID: "b", TTL: 5 * time.Second, Clock: e.clock})
	cancel()
	if err == nil {
		t.Fatal("b won an election while a led")
	}
	if li, ok, err := b.store.Leader(e.ctx); err != nil || !ok || li.ID != "a" || li.URL != "http://a" {
		t.Fatalf("leader seen by b: %+v %v %v, want a", li, ok, err)
	}

	ma := e.m.Guarded(ta)
	e.scan("t1", 1000)
	if a, err := ma.Admit(e.ctx, catchup.Request{Target: "t1", Source: "api"}); err != nil || a.Decision != catchup.DecisionReserved {
		t.Fatalf("leader's admission: %+v %v", a, err)
	}
	if err := ta.Resign(e.ctx); err != nil {
		t.Fatal(err)
	}
	<-ta.Done()
	if ta.Context().Err() == nil || !errors.Is(ta.Err(), catchup.ErrNotLeader) {
		t.Fatalf("resigned term: context %v, err %v", ta.Context().Err(), ta.Err())
	}
	e.scan("t2", 1000)
	_, err = ma.Admit(e.ctx, catchup.Request{Target: "t2", Source: "api"})
	wantErr(t, err, catchup.ErrNotLeader)
	if got := refused(reg, "local"); got != 1 {
		t.Fatalf("refused local writes %v, want 1", got)
	}
	if e.status("t2").Active {
		t.Fatal("the resigned leader's admission was written")
	}

	tb := e.campaign(b.store, "b")
	if a, err := b.m.Guarded(tb).Admit(e.ctx, catchup.Request{Target: "t2", Source: "api"}); err != nil || a.Decision != catchup.DecisionReserved {
		t.Fatalf("new leader's admission: %+v %v", a, err)
	}
	if tb.Rev() <= ta.Rev() {
		t.Fatalf("new term revision %d not above the old %d", tb.Rev(), ta.Rev())
	}
}

// A leader checked its term and is about to write (held at the
// before-controller-write failpoint, as a paused process would be) when its
// term ends and another master leads: etcd refuses the late write because
// the leader key's CreateRevision is not the term's, the refusal is
// counted as "etcd", and nothing of it is written.
func TestDeposedLeaderLateWriteIsRefusedByEtcd(t *testing.T) {
	e := newEnv(t, nil)
	b := e.startMaster(e.policy)
	reg := prometheus.NewRegistry()
	ta := e.campaign(e.store.WithMetrics(catchup.NewMetrics(reg)), "a")
	// The term counts its refusals into the metrics of the store that won
	// it, whichever store's write is refused.
	ma := e.m.Guarded(ta)
	e.scan("t1", 1000)

	dir := t.TempDir()
	if err := failpoint.Enable(failpoint.BeforeControllerWrite+"=pause*1", dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	done := make(chan error, 1)
	go func() {
		_, err := ma.Admit(e.ctx, catchup.Request{Target: "t1", Source: "api"})
		done <- err
	}()
	waitFile(t, filepath.Join(dir, failpoint.BeforeControllerWrite+".paused"))

	if err := ta.Resign(e.ctx); err != nil {
		t.Fatal(err)
	}
	tb := e.campaign(b.store, "b")
	if err := os.WriteFile(filepath.Join(dir, failpoint.BeforeControllerWrite+".resume"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := <-done
	wantErr(t, err, catchup.ErrNotLeader)
	if got := refused(reg, "etcd"); got != 1 {
		t.Fatalf("refused etcd writes %v, want 1 (err %v)", got, err)
	}
	if st := e.status("t1"); st.Active {
		t.Fatalf("the deposed leader's admission was written: %+v", st)
	}
	if a, err := b.m.Guarded(tb).Admit(e.ctx, catchup.Request{Target: "t1", Source: "api"}); err != nil || a.Decision != catchup.DecisionReserved {
		t.Fatalf("new leader's admission: %+v %v", a, err)
	}
}

// An election key this binary does not know fails closed.
func TestUnknownLeaderRecordFailsClosed(t *testing.T) {
	e := newEnv(t, nil)
	if _, ok, err := e.store.Leader(e.ctx); err != nil || ok {
		t.Fatalf("no leader yet: ok %v err %v", ok, err)
	}
	key := e.prefix + "/catchup/leader/7"
	if _, err := e.c.Etcd().Put(e.ctx, key, `{"kind":"catchup-leader","schema_version":2,"id":"x"}`); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.store.Leader(e.ctx)
	wantErr(t, err, coord.ErrUnknownRecord)
	if _, err := e.c.Etcd().Put(e.ctx, key, `{"kind":"something-else","schema_version":1}`); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.store.Leader(e.ctx)
	wantErr(t, err, coord.ErrUnknownRecord)
}

// catchup list: every reserved table with its Job, progress sequence and
// the age of its last progress, at one revision.
func TestListShowsReservationsAndProgressAge(t *testing.T) {
	e := newEnv(t, nil)
	l, err := e.store.List(e.ctx)
	if err != nil || len(l.Reservations) != 0 || l.SlotsUsed != 0 {
		t.Fatalf("empty fleet: %+v %v", l, err)
	}
	job := e.running("t1")
	e.scan("t2", 1000)
	e.wantDecision(e.admit(e.master, "t2"), catchup.DecisionReserved)
	x := e.begin("t1", job)
	e.progress(x, catchup.ProgressBatch)
	e.clock.Step(90 * time.Second)

	l, err = e.store.List(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Reservations) != 2 || l.SlotsUsed != 2 {
		t.Fatalf("list: %+v, want t1 and t2 in 2 slots", l)
	}
	r1, r2 := l.Reservations[0], l.Reservations[1]
	if r1.Table != "t1" || r1.Phase != catchup.PhaseRunning || r1.JobID == nil || *r1.JobID != job || r1.JobUID == nil ||
		r1.Seq == nil || *r1.Seq != 1 || r1.LastProgressAge == nil || *r1.LastProgressAge != 90 || !*r1.AdmissionOpen {
		t.Fatalf("t1: %+v", r1)
	}
	if r2.Table != "t2" || r2.Phase != catchup.PhaseReserved || r2.JobUID != nil || r2.Seq == nil || *r2.Seq != 0 ||
		r2.LastProgressAt != nil || r2.LastProgressAge != nil {
		t.Fatalf("t2: %+v", r2)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not appear", path)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A reservation or target record of a newer schema, or of another kind,
// fails the list closed instead of being skipped.
func TestListFailsClosedOnUnknownRecords(t *testing.T) {
	for name, kv := range map[string][2]string{
		"newer target":      {"/catchup/targets/t1", `{"kind":"catchup-target","schema_version":2,"table":"t1","phase":"running"}`},
		"foreign admission": {"/catchup/admission/t1", `{"kind":"catchup-slot","schema_version":1}`},
		"newer reservation": {"/reservations/t1", `{"kind":"reservation","schema_version":9,"table":"t1","job_id":"j"}`},
		"unparsable target": {"/catchup/targets/t2", `not json`},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			if _, err := e.c.Etcd().Put(e.ctx, e.prefix+kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
			_, err := e.store.List(e.ctx)
			if !errors.Is(err, coord.ErrUnknownRecord) && !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("list: %v, want it to fail closed", err)
			}
		})
	}
}
