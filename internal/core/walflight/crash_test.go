package walflight

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/wal"
)

// TestSIGKILLDuringConcurrentAppends appends from six goroutines through a
// pooled client, SIGKILLs the server process mid-stream, restarts it on the
// same directory and checks conservation: every ACKed entry is read back
// byte-identical at its position, positions are dense, and every entry
// present is a whole record some producer sent.
func TestSIGKILLDuringConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, dir, "")
	c := dial(t, srv.addr, ClientOptions{Conns: 3})
	ctx := context.Background()
	if _, err := c.CreateTable(ctx, "events", testSchema, 2); err != nil {
		t.Fatal(err)
	}
	const producers, rows, enough = 6, 40, 400
	var (
		mu    sync.Mutex
		acked = map[uint64]int64{} // position → record id
		sent  = map[int64]bool{}
		wg    sync.WaitGroup
	)
	reached := make(chan struct{})
	var once sync.Once
	for g := 0; g < producers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				id := int64(g)<<32 | int64(i)
				rec := makeRecord(id, rows)
				mu.Lock()
				sent[id] = true
				mu.Unlock()
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				pos, err := c.Append(actx, "events", 1, rec)
				cancel()
				rec.Release()
				if err != nil {
					return // the server is gone
				}
				mu.Lock()
				if prev, dup := acked[pos]; dup {
					mu.Unlock()
					t.Errorf("position %d ACKed twice (records %d and %d)", pos, prev, id)
					return
				}
				acked[pos] = id
				if len(acked) >= enough {
					once.Do(func() { close(reached) })
				}
				mu.Unlock()
			}
		}(g)
	}
	<-reached
	srv.kill()
	wg.Wait()

	srv = startServer(t, dir, "")
	c2 := dial(t, srv.addr, ClientOptions{Conns: 2})
	var next uint64 = 1
	found := 0
	err := c2.Read(ctx, "events", 1, 1, 0, func(e wal.Entry) error {
		if e.Position != next {
			return fmt.Errorf("position %d follows %d: not dense", e.Position, next-1)
		}
		next++
		if e.Record.NumRows() == 0 {
			return fmt.Errorf("position %d: empty record", e.Position)
		}
		id := e.Record.Column(0).(*array.Int64).Value(0)
		if !sent[id] {
			return fmt.Errorf("position %d holds record %d, which nobody sent", e.Position, id)
		}
		want := makeRecord(id, rows)
		defer want.Release()
		if !bytes.Equal(ipcBytes(t, e.Record), ipcBytes(t, want)) {
			return fmt.Errorf("position %d: record %d is not byte-identical to what was sent", e.Position, id)
		}
		if ackID, ok := acked[e.Position]; ok {
			if ackID != id {
				return fmt.Errorf("position %d ACKed for record %d but holds %d", e.Position, ackID, id)
			}
			found++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != len(acked) {
		t.Fatalf("%d of %d ACKed entries read back after SIGKILL", found, len(acked))
	}
	gens, err := c2.Generations(ctx, "events", 1)
	if err != nil || len(gens) < 2 {
		t.Fatalf("expected the run to cross generations: %+v %v", gens, err)
	}
	// The restarted server continues densely.
	rec := makeRecord(-1, 1)
	defer rec.Release()
	if pos, err := c2.Append(ctx, "events", 1, rec); err != nil || pos != next {
		t.Fatalf("append after restart: %d, %v; want %d", pos, err, next)
	}
	t.Logf("%d entries ACKed before SIGKILL, %d present after restart", len(acked), next-1)
}

// TestEpochRaceOverFlight has two independently pooled clients advance the
// same epoch at once, round after round: exactly one wins each round and the
// loser gets an EpochConflictError carrying the winner's epoch. The final
// epoch survives SIGKILL of the server.
func TestEpochRaceOverFlight(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, dir, "")
	ctx := context.Background()
	clients := []*Client{dial(t, srv.addr, ClientOptions{Conns: 2}), dial(t, srv.addr, ClientOptions{Conns: 2})}
	if _, err := clients[0].CreateTable(ctx, "t", testSchema, 1); err != nil {
		t.Fatal(err)
	}
	const rounds = 20
	for r := uint64(0); r < rounds; r++ {
		start := make(chan struct{})
		errs := make([]error, len(clients))
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = c.AdvanceEpoch(ctx, "t", r)
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			var ce *wal.EpochConflictError
			switch {
			case err == nil:
				wins++
			case errors.As(err, &ce) && errors.Is(err, wal.ErrEpochConflict):
				if ce.Current != r+1 || ce.Expect != r || ce.Table != "t" {
					t.Fatalf("round %d: conflict %+v", r, ce)
				}
			default:
				t.Fatalf("round %d: unexpected error %v", r, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners", r, wins)
		}
	}
	srv.kill()
	srv = startServer(t, dir, "")
	c := dial(t, srv.addr, ClientOptions{Conns: 1})
	if e, err := c.Epoch(ctx, "t"); err != nil || e != rounds {
		t.Fatalf("epoch after SIGKILL: %d, %v; want %d", e, err, rounds)
	}
}
