package wal

import "time"

// wakeSealer tells the sealer that a generation received its first entry.
func (e *Engine) wakeSealer() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// sealer seals open generations that reach the age limit. It sleeps on the
// injected clock until the earliest open generation is due, or until woken.
func (e *Engine) sealer() {
	defer close(e.sealerDone)
	age := e.opts.MaxGenerationAge
	if age < 0 {
		<-e.stop
		return
	}
	for {
		now := e.opts.Clock.Now()
		var next time.Time
		e.mu.Lock()
		ts := make([]*table, 0, len(e.tables))
		for _, t := range e.tables {
			ts = append(ts, t)
		}
		e.mu.Unlock()
		for _, t := range ts {
			for _, s := range t.shards {
				opened, err := s.sealIfOlder(now.Add(-age))
				if err != nil {
					e.opts.Logger.Error("wal: age seal failed", "table", t.name, "shard", s.id, "err", err)
					continue
				}
				if !opened.IsZero() && (next.IsZero() || opened.Before(next)) {
					next = opened
				}
			}
		}
		var timerC <-chan time.Time
		var timer interface{ Stop() bool }
		if !next.IsZero() {
			tm := e.opts.Clock.NewTimer(next.Add(age).Sub(now))
			timerC, timer = tm.C(), tm
		}
		select {
		case <-e.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-e.wake:
		case <-timerC:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}
