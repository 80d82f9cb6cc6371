package catchup

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// workQueue is a small rate-limited, delaying work queue in the manner of
// client-go's workqueue (which this module does not depend on yet), driven
// by the injected clock: a key is queued at most once; a key being
// processed and added again is processed again after Done; AddAfter holds
// a key until its time; AddRateLimited backs off per key exponentially
// until Forget.
type workQueue struct {
	clock          clock.Clock
	baseDelay, max time.Duration

	mu         sync.Mutex
	queue      []string
	queued     map[string]bool
	processing map[string]bool
	dirty      map[string]bool
	waiting    map[string]time.Time
	failures   map[string]int
	wake       chan struct{}
}

func newWorkQueue(c clock.Clock, base, max time.Duration) *workQueue {
	return &workQueue{
		clock: c, baseDelay: base, max: max,
		queued: map[string]bool{}, processing: map[string]bool{}, dirty: map[string]bool{},
		waiting: map[string]time.Time{}, failures: map[string]int{},
		wake: make(chan struct{}, 1),
	}
}

// Add queues key now.
func (q *workQueue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *workQueue) addLocked(key string) {
	delete(q.waiting, key)
	if q.processing[key] {
		q.dirty[key] = true
		return
	}
	if q.queued[key] {
		return
	}
	q.queued[key] = true
	q.queue = append(q.queue, key)
	q.signal()
}

func (q *workQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// AddAfter queues key after d (now when d ≤ 0); an earlier pending time
// for the same key wins.
func (q *workQueue) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	at := q.clock.Now().Add(d)
	if cur, ok := q.waiting[key]; ok && !at.Before(cur) {
		return
	}
	q.waiting[key] = at
	q.signal()
}

// AddRateLimited queues key after its per-key backoff.
func (q *workQueue) AddRateLimited(key string) {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	q.mu.Unlock()
	d := q.baseDelay
	for i := 0; i < n && d < q.max; i++ {
		d *= 2
	}
	q.AddAfter(key, min(d, q.max))
}

// Forget clears key's backoff.
func (q *workQueue) Forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
}

// Get blocks until a key is due or ctx ends (ok false).
func (q *workQueue) Get(ctx context.Context) (string, bool) {
	for {
		q.mu.Lock()
		now := q.clock.Now()
		var next time.Time
		for key, at := range q.waiting {
			if !at.After(now) {
				q.addLocked(key)
			} else if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		if len(q.queue) > 0 {
			key := q.queue[0]
			q.queue = q.queue[1:]
			delete(q.queued, key)
			q.processing[key] = true
			q.mu.Unlock()
			return key, true
		}
		q.mu.Unlock()
		var t clock.Timer
		var timer <-chan time.Time
		if !next.IsZero() {
			t = q.clock.NewTimer(next.Sub(now))
			timer = t.C()
		}
		select {
		case <-ctx.Done():
		case <-q.wake:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return "", false
		}
	}
}

// Done marks key processed; a key added meanwhile is queued again.
func (q *workQueue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.dirty[key] {
		delete(q.dirty, key)
		q.addLocked(key)
	}
}

// Len is the number of keys queued now (not waiting, not processing).
func (q *workQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}
