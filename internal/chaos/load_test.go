package chaos

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
)

// tableLoad is what the producers of one table appended: the ACKed ids, and
// the ids of appends whose outcome is unknown (an error or a timeout: they
// may be durable without having been ACKed, so they may appear at most
// once, but need not).
type tableLoad struct {
	acked   *exactlyonce.Acked
	mu      sync.Mutex
	unknown map[int64]bool
	errors  atomic.Int64
}

func (l *tableLoad) addUnknown(from, to int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := from; id < to; id++ {
		l.unknown[id] = true
	}
}

// load is one producer goroutine per table, appending 20-row batches to
// alternate shards through the WAL server's Flight API until stopped.
type load struct {
	cli    *walflight.Client
	tables map[string]*tableLoad
	stop   atomic.Bool
	wg     sync.WaitGroup
	fatal  atomic.Pointer[error] // a producer bug (an id made twice)
}

func startLoad(ctx context.Context, s *system, seed uint64) (*load, error) {
	cli, err := walflight.Dial(ctx, s.walAddr, walflight.ClientOptions{Conns: 1})
	if err != nil {
		return nil, err
	}
	l := &load{cli: cli, tables: map[string]*tableLoad{}}
	for i, table := range tables {
		info, err := cli.Table(ctx, table)
		if err != nil {
			cli.Close()
			return nil, err
		}
		tl := &tableLoad{acked: exactlyonce.NewAcked(), unknown: map[int64]bool{}}
		l.tables[table] = tl
		p, err := exactlyonce.NewProducer(cli, table, info.Schema, seed+uint64(i), int64(i+1)*1_000_000_000, tl.acked)
		if err != nil {
			cli.Close()
			return nil, err
		}
		l.wg.Add(1)
		go l.produce(p, tl)
	}
	return l, nil
}

func (l *load) produce(p *exactlyonce.Producer, tl *tableLoad) {
	defer l.wg.Done()
	for i := 0; !l.stop.Load(); i++ {
		from := p.Gen.NextID
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		err := p.Append(ctx, i%2, 20)
		cancel()
		if err != nil && !errors.Is(err, exactlyonce.ErrProducedTwice) {
			tl.addUnknown(from, p.Gen.NextID)
			tl.errors.Add(1)
			time.Sleep(100 * time.Millisecond) // the WAL is down or faulty: do not spin
			continue
		}
		if err != nil {
			l.fatal.Store(&err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finish stops the producers, waiting for their last appends.
func (l *load) finish() error {
	l.stop.Store(true)
	l.wg.Wait()
	if err := l.fatal.Load(); err != nil {
		return *err
	}
	return nil
}
