package walraft

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// applyClock is the engine's clock: while a command is applied it reads the
// command's time (the leader's clock at proposal), so creation and seal
// times are identical on every replica; otherwise it is the real clock.
type applyClock struct {
	clock.RealClock
	mu  sync.Mutex
	pin time.Time
}

func (c *applyClock) set(t time.Time) {
	c.mu.Lock()
	c.pin = t
	c.mu.Unlock()
}

func (c *applyClock) clear() { c.set(time.Time{}) }

// Now returns the pinned time while a command applies, else the real time.
func (c *applyClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pin.IsZero() {
		return c.pin
	}
	return time.Now()
}

// Since measures from Now.
func (c *applyClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
