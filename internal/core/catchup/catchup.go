// Package catchup is the etcd side of walctl's catch-up control plane
// (DESIGN.md §3 rules 14–16, §4 defaults, issue 7): the persisted policy,
// the backlog statistics, admission of catch-up Jobs (one code path for
// the API and the scan), execution progress, stall detection, cancellation
// and the controller that drives a Runner (Kubernetes Jobs or local
// processes) from the durable records.
//
// Key layout under the coord prefix (default /walctl/v1):
//
//	<prefix>/reservations/<table>         coord.Reservation: ordinary claims exclude the table;
//	                                      the executor claims with exactly its JobID
//	<prefix>/catchup/policy               the policy persisted on the master's first start,
//	                                      changed only by `walctl catchup policy set` (CAS,
//	                                      audited under <prefix>/audit/)
//	<prefix>/catchup/stats/<table>        backlog statistics with their observation time
//	<prefix>/catchup/targets/<table>      the table's catch-up record: phase, attempt, Job,
//	                                      termination intent, failure budget, outcome
//	<prefix>/catchup/slots/<n>            fleet slot n (0 ≤ n < max_jobs) held by one table
//	<prefix>/catchup/admission/<table>    open/closed commit admission, execution id and
//	                                      progress sequence (rule 15)
//	<prefix>/catchup/heartbeats/<table>   executor heartbeat: shown, never progress
//
// Every record carries a kind and a schema version; meeting an unknown kind
// or a newer version fails closed with coord.ErrUnknownRecord. Every
// transition of a table is a transaction guarded by the ModRevision of the
// records it read, so two masters, a restarted master and the executor can
// race freely: the loser re-reads and decides again.
//
// Who calls what:
//
//   - `walctl master run`: NewStore, OpenMaster (fails closed on a policy
//     mismatch), NewController(...).Run in the background; the API calls
//     Master.Admit (POST), Controller.Status (GET) and Master.Cancel.
//   - `walctl backlog scan`: NewScanner(store, wal, watermarks.FromLance(root)).Scan.
//   - `walctl catchup run --table T --job J`: coord.Acquire with
//     coord.OwnerCatchup and JobID J, Store.BeginExecution, then per batch
//     Store.RecordProgress(ProgressBatch), before each commit
//     Store.CheckAdmission, after it RecordProgress(ProgressCommit);
//     Store.Heartbeat for status only. ErrAdmissionClosed or
//     ErrWrongExecution: start nothing new and exit.
//   - Runners (Kubernetes, local processes) implement Runner.
//
// Error categories, for the HTTP layer: errs.ErrInvalid → 400,
// ErrNotActive (errs.ErrNotFound) → 404, ErrProgressAdvanced and other
// errs.ErrConflict → 409, errs.ErrUnavailable → 503, coord.ErrUnknownRecord
// (errs.ErrCorrupt) → 500. Admission decisions are answers, not errors.
package catchup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
)

// Sentinel errors; callers test them with errors.Is. Their category (the
// wrapped errs.Err*) decides the exit code and the HTTP status.
var (
	// ErrPolicyMismatch means the policy persisted in etcd differs from the
	// starting master's; see *PolicyMismatchError for the fields.
	ErrPolicyMismatch = fmt.Errorf("catch-up policy differs from the persisted one: %w", errs.ErrConflict)
	// ErrAdmissionClosed means the table's commit admission is closed (or
	// gone): the executor must not start another commit.
	ErrAdmissionClosed = fmt.Errorf("catch-up admission is closed: %w", errs.ErrFenced)
	// ErrWrongExecution means the caller's Job or execution id is not the
	// table's current one: a newer execution exists, the caller must stop.
	ErrWrongExecution = fmt.Errorf("not the current catch-up execution: %w", errs.ErrFenced)
	// ErrProgressAdvanced means a cancellation lost its CAS: progress (or a
	// new execution) was recorded after the observation it was based on.
	ErrProgressAdvanced = fmt.Errorf("progress advanced since it was observed; cancellation abandoned: %w", errs.ErrConflict)
	// ErrAlreadyFinished means a cancellation came after the Job had ended
	// by itself: its real outcome stands.
	ErrAlreadyFinished = fmt.Errorf("a finished catch-up job cannot be cancelled: %w", errs.ErrConflict)
	// ErrNotActive means the table has no active catch-up (cancel, status
	// of an execution).
	ErrNotActive = fmt.Errorf("no active catch-up: %w", errs.ErrNotFound)
)

// Record kinds written by this package, all at SchemaVersion.
const (
	KindPolicy    = "catchup-policy"
	KindStats     = "catchup-stats"
	KindTarget    = "catchup-target"
	KindSlot      = "catchup-slot"
	KindAdmission = "catchup-admission"
	KindHeartbeat = "catchup-heartbeat"
	SchemaVersion = 1
)

// keys derives every key from the coord client's prefix.
type keys struct{ c *coord.Client }

func (k keys) dir() string                    { return k.c.Prefix() + "/catchup/" }
func (k keys) policy() string                 { return k.dir() + "policy" }
func (k keys) statsDir() string               { return k.dir() + "stats/" }
func (k keys) stats(t string) string          { return k.statsDir() + t }
func (k keys) targetsDir() string             { return k.dir() + "targets/" }
func (k keys) target(t string) string         { return k.targetsDir() + t }
func (k keys) slotsDir() string               { return k.dir() + "slots/" }
func (k keys) slot(n int) string              { return k.slotsDir() + strconv.Itoa(n) }
func (k keys) admission(t string) string      { return k.dir() + "admission/" + t }
func (k keys) heartbeat(t string) string      { return k.dir() + "heartbeats/" + t }
func (k keys) claim(t string) string          { return k.c.ClaimKey(t) }
func (k keys) reservation(t string) string    { return k.c.ReservationKey(t) }
func (k keys) auditDir() string               { return k.c.Prefix() + "/audit/" }
func (k keys) claimsDir() string              { return k.c.Prefix() + "/claims/" }
func (k keys) reservationsDir() string        { return k.c.Prefix() + "/reservations/" }
func (k keys) tableOf(dir, key string) string { return key[len(dir):] }

// unavailable turns an etcd error into one wrapping errs.ErrUnavailable,
// or the caller's cause when ctx ended (cancellation is not an outage).
func unavailable(ctx context.Context, c *coord.Client, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, context.Cause(ctx))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("etcd %v: %s: no answer in time: %w", c.Endpoints(), op, errs.ErrUnavailable)
	}
	return fmt.Errorf("etcd %v: %s: %v: %w", c.Endpoints(), op, err, errs.ErrUnavailable)
}

// utc strips the monotonic reading and location so records compare and
// encode stably.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Round(0)
}
