package catchup

import (
	"context"
	"time"
)

// Test access for package catchup_test (which needs catchuptest, and so
// cannot be package catchup itself).

// ReconcileForTest runs one reconcile of table.
func (c *Controller) ReconcileForTest(ctx context.Context, table string) (time.Duration, error) {
	return c.reconcile(ctx, table)
}

// SetBeforeCancelCAS installs the hook run between a cancellation's
// observation and its CAS.
func (s *Store) SetBeforeCancelCAS(f func(table string)) { s.hooks.beforeCancelCAS = f }

// QueueLenForTest is the number of tables queued now.
func (c *Controller) QueueLenForTest() int { return c.q.Len() }
