package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

// NotLeaderError is a follower's answer to a request only the leader
// serves (admission, cancellation): HTTP 503 with the leader's URL in the
// body ("leader") and the X-Walctl-Leader header; Client follows it once.
type NotLeaderError struct {
	// Leader is who leads now; empty during an election.
	Leader catchup.LeaderInfo
	// Cause is the refusal of a write this master tried as a deposed
	// leader (nil on a follower).
	Cause error
}

// Error names why this master cannot serve the request and who can.
func (e *NotLeaderError) Error() string {
	msg := "this master is a follower"
	if e.Cause != nil {
		msg = fmt.Sprintf("this master's leadership ended (%v)", e.Cause)
	}
	if e.Leader.URL == "" {
		return msg + " and no catch-up leader is elected yet; try again shortly"
	}
	return fmt.Sprintf("%s; the catch-up leader is %s at %s", msg, e.Leader.ID, e.Leader.URL)
}

// Unwrap makes it errs.ErrUnavailable (503) and catchup.ErrNotLeader.
func (e *NotLeaderError) Unwrap() error {
	if e.Cause != nil {
		return e.Cause
	}
	return catchup.ErrNotLeader
}

// replica is one master's API view of the catch-up fleet: while it leads,
// admissions and cancellations go to the current term's Master and
// Controller; otherwise they are refused with the leader's address.
// Status works on every replica (from etcd; the leader adds its stall
// observation).
type replica struct {
	m      *catchup.Master
	s      *catchup.Store
	runner catchup.Runner
	cfg    RunConfig
	id     string
	url    string
	clock  clock.WithTicker

	mu  sync.Mutex
	cur Catchup // the term's, nil while following
	// led is closed when this replica's first term starts.
	led     chan struct{}
	ledOnce sync.Once
}

// ready returns once a client's request will not be refused for an
// election in progress: this replica leads, or another one does.
func (r *replica) ready(ctx context.Context) error {
	li, err := r.s.WaitLeader(ctx)
	if err != nil || li.ID != r.id {
		return err
	}
	select {
	case <-r.led:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (r *replica) current() Catchup {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

func (r *replica) set(c Catchup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur = c
}

// notLeader names the leader to a caller this replica cannot serve:
// because it follows (cause nil) or because its term ended under the
// request (cause is catchup.ErrNotLeader; any other error is returned as
// it is).
func (r *replica) notLeader(ctx context.Context, cause error) error {
	if cause != nil && !errors.Is(cause, catchup.ErrNotLeader) {
		return cause
	}
	li, _, err := r.s.Leader(ctx)
	if err != nil {
		return errors.Join(cause, err)
	}
	return &NotLeaderError{Leader: li, Cause: cause}
}

// Admit implements Catchup.
func (r *replica) Admit(ctx context.Context, req catchup.Request) (catchup.Admission, error) {
	c := r.current()
	if c == nil {
		return catchup.Admission{}, r.notLeader(ctx, nil)
	}
	a, err := c.Admit(ctx, req)
	if err != nil {
		return a, r.notLeader(ctx, err)
	}
	return a, nil
}

// Cancel implements Catchup.
func (r *replica) Cancel(ctx context.Context, table, reason, by string) error {
	c := r.current()
	if c == nil {
		return r.notLeader(ctx, nil)
	}
	if err := c.Cancel(ctx, table, reason, by); err != nil {
		return r.notLeader(ctx, err)
	}
	return nil
}

// Status implements Catchup.
func (r *replica) Status(ctx context.Context, table string) (catchup.Status, error) {
	if c := r.current(); c != nil {
		return c.Status(ctx, table)
	}
	return r.s.Status(ctx, table)
}

// lead campaigns until ctx ends, running the controller for each term won.
// A lost term (lease lapsed, key gone) stops the controller and campaigns
// again; a controller that cannot start (records this binary does not
// know) ends Run with its error.
func (r *replica) lead(ctx context.Context) error {
	for ctx.Err() == nil {
		term, err := r.s.Campaign(ctx, catchup.LeaderConfig{ID: r.id, URL: r.url, TTL: r.cfg.LeaderTTL})
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, catchup.ErrNotLeader), errors.Is(err, errs.ErrUnavailable):
			r.cfg.Logger.WarnContext(ctx, "catch-up leader election failed; campaigning again", "err", err)
			r.pause(ctx, time.Second)
			continue
		case err != nil:
			return err
		}
		if err := r.runTerm(ctx, term); err != nil {
			return err
		}
	}
	return nil
}

// runTerm runs one term's controller until the term or ctx ends.
func (r *replica) runTerm(ctx context.Context, term *catchup.Term) error {
	m := r.m.Guarded(term)
	ctrl, err := catchup.NewController(m, catchup.ControllerConfig{Runner: r.runner, Logger: r.cfg.Logger,
		Scanner: catchup.NewScanner(m.Store(), r.cfg.WAL, r.cfg.Watermarks), ScanInterval: r.cfg.ScanInterval})
	if err != nil {
		_ = term.Resign(ctx)
		return err
	}
	tctx, cancel := context.WithCancel(term.Context())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	r.cfg.Metrics.SetLeader(true)
	r.set(NewCatchup(m, ctrl))
	r.ledOnce.Do(func() { close(r.led) })
	r.cfg.Logger.InfoContext(ctx, "catch-up leader: this master leads", "id", r.id, "key", term.Key(), "revision", term.Rev())
	err = ctrl.Run(tctx)
	r.set(nil)
	r.cfg.Metrics.SetLeader(false)
	lost := term.Err()
	// Resign is guarded by the term's revision: after a lost term it
	// deletes nothing of a successor's, and it revokes a lease that may
	// outlive the local wall-time rule.
	if rerr := term.Resign(ctx); rerr != nil {
		r.cfg.Logger.WarnContext(ctx, "catch-up leader: resign failed; the lease expires by itself", "err", rerr)
	}
	switch {
	case ctx.Err() != nil:
		return nil
	case lost != nil:
		// Whatever the controller returned, it returned because the term
		// ended (a failed first listing included): campaign again.
		r.cfg.Logger.WarnContext(ctx, "catch-up leader: leadership lost; controller stopped", "id", r.id,
			"revision", term.Rev(), "cause", lost, "controller_err", err)
		return nil
	}
	return err
}

// pause waits d on the replica's clock, or until ctx ends.
func (r *replica) pause(ctx context.Context, d time.Duration) {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

var _ Catchup = (*replica)(nil)
