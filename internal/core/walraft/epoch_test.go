package walraft

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/walctl/walctl/internal/core/wal"
)

type casIn struct {
	read   bool
	expect uint64
}

type casOut struct {
	ok      bool   // the CAS won
	unknown bool   // outcome unknown (returned at the end of history)
	val     uint64 // the new epoch (ok), the current one (conflict), or the read
}

// epochModel is the publisher epoch: a register advanced by e → e+1 CAS.
var epochModel = porcupine.Model{
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(uint64), input.(casIn), output.(casOut)
		switch {
		case in.read:
			return out.val == s, s
		case out.unknown:
			if s == in.expect {
				return true, s + 1
			}
			return true, s
		case out.ok:
			return s == in.expect && out.val == s+1, s + 1
		default:
			return s != in.expect && out.val == s, s
		}
	},
}

// TestEpochModelRejectsTwoWinners shows the check can fail: two owners
// both winning 0 → 1 is not linearizable.
func TestEpochModelRejectsTwoWinners(t *testing.T) {
	h := []porcupine.Operation{
		{ClientId: 0, Input: casIn{expect: 0}, Call: 0, Output: casOut{ok: true, val: 1}, Return: 10},
		{ClientId: 1, Input: casIn{expect: 0}, Call: 1, Output: casOut{ok: true, val: 1}, Return: 11},
	}
	if porcupine.CheckOperations(epochModel, h) {
		t.Fatal("the model accepted two winners of 0 → 1")
	}
}

// TestEpochCASLinearizableAcrossLeaderChange: concurrent advancers race
// e → e+1 through whichever replica leads while the leader is stopped
// midway; the history of CAS outcomes (unknown ones open-ended) and a
// final read is linearizable, so no two owners both won one step.
func TestEpochCASLinearizableAcrossLeaderChange(t *testing.T) {
	c := newCluster(t, 3, nil)
	mustCreate(t, c.leader(), "t1", 1)
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu   sync.Mutex
		hist []porcupine.Operation
		wins atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := 0; p < 6; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			var expect uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := c.leaderOrNil()
				if n == nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				call := now()
				e, err := n.AdvanceEpoch(ctx, "t1", expect)
				ret := now()
				cancel()
				var ec *wal.EpochConflictError
				op := porcupine.Operation{ClientId: p, Input: casIn{expect: expect}, Call: call, Return: ret}
				switch {
				case err == nil:
					op.Output = casOut{ok: true, val: e}
					expect = e
					wins.Add(1)
				case errors.As(err, &ec):
					op.Output = casOut{val: ec.Current}
					expect = ec.Current
				case IsPreProposal(err):
					continue // never entered the log
				case errors.Is(err, ErrOutcomeUnknown):
					op.Output, op.Return = casOut{unknown: true}, 1<<62
				default:
					continue // the replica closed under us before proposing
				}
				mu.Lock()
				hist = append(hist, op)
				mu.Unlock()
			}
		}(p)
	}
	for wins.Load() < 20 {
		time.Sleep(5 * time.Millisecond)
	}
	old := c.leader()
	for i := range c.nodes {
		if c.node(i) == old {
			c.stop(i)
		}
	}
	c.leader()
	target := wins.Load() + 20
	for wins.Load() < target {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	c.waitApplied()
	e, err := c.leader().Epoch(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	hist = append(hist, porcupine.Operation{ClientId: 99, Input: casIn{read: true}, Call: now(), Output: casOut{val: e}, Return: now()})
	if res := porcupine.CheckOperationsTimeout(epochModel, hist, time.Minute); res != porcupine.Ok {
		t.Fatalf("epoch history of %d operations is %v", len(hist), res)
	}
	if uint64(wins.Load()) > e {
		t.Fatalf("%d CAS wins but the epoch is %d", wins.Load(), e)
	}
	t.Logf("%d operations, %d wins, final epoch %d", len(hist), wins.Load(), e)
}
