package powerloss

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
)

// producers append batches of 1 to 40 rows to every shard of a table and
// file each append's outcome in the run's ledger (exactlyonce.Ledger: the
// ACKed ones with their positions; cut or refused ones).
type producers struct {
	led *exactlyonce.Ledger

	mu        sync.Mutex
	nextRange int64 // numbers the producers' id ranges
	ackHook   func()
}

func newProducers() *producers { return &producers{led: exactlyonce.NewLedger()} }

// idRange hands out a fresh range of a million ids.
func (l *producers) idRange() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextRange++
	return l.nextRange * 1_000_000
}

// produce appends to every shard until ctx ends; the returned wait waits
// for the producers.
func (l *producers) produce(ctx context.Context, cli *walflight.Client, table string, schema *arrow.Schema, shards int, seed uint64) (wait func() error) {
	var wg sync.WaitGroup
	errc := make(chan error, shards)
	for shard := 0; shard < shards; shard++ {
		p, err := exactlyonce.NewProducer(cli, table, schema, seed+uint64(shard), l.idRange(), l.led.Acked)
		if err != nil {
			errc <- err
			continue
		}
		p.Ledger = l.led
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

func (l *producers) run(ctx context.Context, p *exactlyonce.Producer, shard int, rng *rand.Rand) error {
	for ctx.Err() == nil {
		err := p.Append(ctx, shard, 1+rng.IntN(40))
		if errors.Is(err, exactlyonce.ErrProducedTwice) {
			return err
		}
		if err != nil {
			// The WAL is being cut or restarted: wait a little, or stop.
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		l.mu.Lock()
		hook := l.ackHook
		l.mu.Unlock()
		if hook != nil {
			hook()
		}
	}
	return nil
}

// waitAcks waits up to d for n more ACKs and reports whether they came.
func (l *producers) waitAcks(n int, d time.Duration) bool {
	reached := make(chan struct{})
	var once sync.Once
	count := 0
	l.mu.Lock()
	l.ackHook = func() {
		l.mu.Lock()
		count++
		c := count
		l.mu.Unlock()
		if c == n {
			once.Do(func() { close(reached) })
		}
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.ackHook = nil
		l.mu.Unlock()
	}()
	select {
	case <-reached:
		return true
	case <-time.After(d):
		return false
	}
}
