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

// tableLoad is what the producers of one table appended: the ledger of
// ACKed appends (with their positions) and of failed ones, of unknown
// outcome or refused.
type tableLoad struct {
	ledger *exactlyonce.Ledger
	errors atomic.Int64
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
		tl := &tableLoad{ledger: exactlyonce.NewLedger()}
		l.tables[table] = tl
		p, err := exactlyonce.NewProducer(cli, table, info.Schema, seed+uint64(i), int64(i+1)*1_000_000_000, tl.ledger.Acked)
		if err != nil {
			cli.Close()
			return nil, err
		}
		p.Ledger = tl.ledger
		l.wg.Add(1)
		go l.produce(p, tl)
	}
	return l, nil
}

func (l *load) produce(p *exactlyonce.Producer, tl *tableLoad) {
	defer l.wg.Done()
	for i := 0; !l.stop.Load(); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		err := p.Append(ctx, i%2, 20)
		cancel()
		if err != nil && !errors.Is(err, exactlyonce.ErrProducedTwice) {
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
