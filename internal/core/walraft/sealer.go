package walraft

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// ageSealer makes open generations publishable after MaxGenerationAge. Only
// the leader decides, and it decides through the log (a Seal command), so
// generation boundaries are identical on every replica. A generation is
// sealed at most one tick (a quarter of the age) late.
func (n *Node) ageSealer() {
	defer close(n.sealDone)
	age := n.cfg.Engine.MaxGenerationAge
	if age < 0 {
		<-n.stop
		return
	}
	t := n.cfg.Clock.NewTicker(max(age/4, 10*time.Millisecond))
	defer t.Stop()
	seen := map[genKey]time.Time{}
	for {
		select {
		case <-n.stop:
			return
		case <-t.C():
		}
		if n.raft.State() != raft.Leader {
			clear(seen)
			continue
		}
		n.sealAged(seen, age)
	}
}

type genKey struct {
	table string
	shard int
	gen   uint64
}

func (n *Node) sealAged(seen map[genKey]time.Time, age time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), max(age, 5*time.Second))
	defer cancel()
	now := n.cfg.Clock.Now()
	open := map[genKey]bool{}
	tables, err := n.Tables(ctx)
	if err != nil {
		return
	}
	for _, t := range tables {
		for s := 0; s < t.Shards; s++ {
			gens, err := n.Generations(ctx, t.Name, s)
			if err != nil || len(gens) == 0 || gens[len(gens)-1].Sealed {
				continue
			}
			k := genKey{t.Name, s, gens[len(gens)-1].ID}
			open[k] = true
			first, ok := seen[k]
			if !ok {
				seen[k] = now
				continue
			}
			if now.Sub(first) >= age {
				if _, err := n.Seal(ctx, t.Name, s); err != nil {
					n.log.Warn("walraft: age seal failed", "table", t.Name, "shard", s, "err", err)
				}
			}
		}
	}
	for k := range seen {
		if !open[k] {
			delete(seen, k)
		}
	}
}
