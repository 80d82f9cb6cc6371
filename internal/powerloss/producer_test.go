package powerloss

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
)

// ledger is what the producers of a run know: the ACKed ids, the highest
// ACKed position of each shard, and the id ranges of appends whose outcome
// is unknown (cut mid-flight): each may be in the table, but only whole.
type ledger struct {
	acked *exactlyonce.Acked

	mu        sync.Mutex
	maxPos    map[int]uint64
	uncertain [][2]int64 // [first, end)
	nextRange int64      // numbers the producers' id ranges
	ackHook   func()
}

func newLedger() *ledger {
	return &ledger{acked: exactlyonce.NewAcked(), maxPos: map[int]uint64{}}
}

// idRange hands out a fresh range of a million ids.
func (l *ledger) idRange() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextRange++
	return l.nextRange * 1_000_000
}

// producers append batches to every shard until ctx ends. Every append's
// outcome is recorded in the ledger; the returned wait waits for them.
func (l *ledger) produce(ctx context.Context, cli *walflight.Client, table string, schema *arrow.Schema, shards int, seed uint64) (wait func() error) {
	var wg sync.WaitGroup
	errc := make(chan error, shards)
	for shard := 0; shard < shards; shard++ {
		p, err := exactlyonce.NewProducer(cli, table, schema, seed+uint64(shard), l.idRange(), l.acked)
		if err != nil {
			errc <- err
			continue
		}
		rng := rand.New(rand.NewPCG(seed, uint64(shard)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.run(ctx, p, shard, rng); err != nil {
				errc <- err
			}
		}()
	}
	return func() error {
		wg.Wait()
		close(errc)
		return <-errc
	}
}

func (l *ledger) run(ctx context.Context, p *exactlyonce.Producer, shard int, rng *rand.Rand) error {
	for ctx.Err() == nil {
		first := p.Gen.NextID
		b := p.Gen.Batch(1 + rng.IntN(40))
		end := p.Gen.NextID
		pos, err := p.Log.Append(ctx, p.Table, shard, b)
		if err != nil {
			b.Release()
			l.mu.Lock()
			l.uncertain = append(l.uncertain, [2]int64{first, end})
			l.mu.Unlock()
			// The WAL is being cut or restarted: wait a little, or stop.
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		err = p.Acked.Add(b)
		b.Release()
		if err != nil {
			return err
		}
		l.mu.Lock()
		l.maxPos[shard] = max(l.maxPos[shard], pos)
		hook := l.ackHook
		l.mu.Unlock()
		if hook != nil {
			hook()
		}
	}
	return nil
}

// onAck sets the function called after every ACK (nil: none).
func (l *ledger) onAck(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ackHook = fn
}

// checkHalfVisible reports an un-ACKed append of which some rows but not
// all are in the table (count: each id's rows).
func (l *ledger) checkHalfVisible(count map[int64]int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.uncertain {
		n := 0
		for id := r[0]; id < r[1]; id++ {
			if count[id] > 0 {
				n++
			}
		}
		if n != 0 && int64(n) != r[1]-r[0] {
			return fmt.Errorf("un-ACKed append of ids [%d, %d) is half visible: %d of its %d rows are in the table", r[0], r[1], n, r[1]-r[0])
		}
	}
	return nil
}

// isUncertain reports whether id belongs to an append of unknown outcome.
func (l *ledger) isUncertain(id int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.uncertain {
		if id >= r[0] && id < r[1] {
			return true
		}
	}
	return false
}
