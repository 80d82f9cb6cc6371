package catchup

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
)

// ProgressKind is what advanced an execution (rule 15). Nothing else does:
// heartbeats, commit conflicts and errors are not progress.
type ProgressKind string

// Progress kinds.
const (
	// ProgressBatch: a completed, non-empty merge batch.
	ProgressBatch ProgressKind = "batch"
	// ProgressCommit: a successful manifest commit.
	ProgressCommit ProgressKind = "commit"
)

// Execution is one run of `walctl catchup run` under a reservation.
type Execution struct {
	Table  string `json:"table"`
	JobID  string `json:"job_id"`
	ExecID uint64 `json:"exec_id"`
}

// readAdmission reads the table's admission record linearizably.
func (s *Store) readAdmission(ctx context.Context, table string) (*admissionRecord, *mvccpb.KeyValue, error) {
	if err := coord.ValidateTable(table); err != nil {
		return nil, nil, err
	}
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.cli.Get(cctx, s.k.admission(table))
	cancel()
	if err != nil {
		return nil, nil, unavailable(ctx, s.c, "read catch-up admission of table "+table, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil, fmt.Errorf("table %s: no catch-up admission: %w", table, ErrAdmissionClosed)
	}
	var a admissionRecord
	if err := decodeKV(resp.Kvs[0], KindAdmission, &a); err != nil {
		return nil, nil, err
	}
	return &a, resp.Kvs[0], nil
}

func checkOpen(table string, a *admissionRecord) error {
	if !a.Open {
		return fmt.Errorf("table %s, job %s: admission closed (%s): %w", table, a.JobID, a.ClosedReason, ErrAdmissionClosed)
	}
	return nil
}

func checkExec(table string, a *admissionRecord, execID uint64) error {
	if err := checkOpen(table, a); err != nil {
		return err
	}
	if a.ExecID != execID {
		return fmt.Errorf("table %s: execution %d is not the current one (%d, job %s): %w",
			table, execID, a.ExecID, a.JobID, ErrWrongExecution)
	}
	return nil
}

// casAdmission applies mutate to the admission record with a CAS on its
// ModRevision, re-reading on a lost race (a concurrent cancellation is then
// seen by check). It returns the record as written.
func (s *Store) casAdmission(ctx context.Context, table, op string, check func(*admissionRecord) error,
	mutate func(*admissionRecord)) (admissionRecord, error) {
	for try := 0; try < maxTxnRetries; try++ {
		a, kv, err := s.readAdmission(ctx, table)
		if err != nil {
			return admissionRecord{}, err
		}
		if err := check(a); err != nil {
			return admissionRecord{}, err
		}
		mutate(a)
		resp, err := s.txn(ctx, op, []clientv3.Cmp{revGuard(s.k.admission(table), kv.ModRevision)},
			clientv3.OpPut(s.k.admission(table), encode(KindAdmission, *a)))
		if err != nil {
			return admissionRecord{}, err
		}
		if resp.Succeeded {
			return *a, nil
		}
	}
	return admissionRecord{}, fmt.Errorf("table %s: %s lost %d races in a row: %w", table, op, maxTxnRetries, errs.ErrConflict)
}

// BeginExecution starts a new execution of jobID's admission on table and
// returns its id, larger than every earlier execution id of the table. It
// is guarded by open admission and the Job identity: ErrAdmissionClosed
// (closed, cancelled or never admitted) or ErrWrongExecution (the table is
// admitted for another Job). A new execution gets a fresh stall grace
// period from the master, and beginning one defeats a concurrent
// cancellation based on an earlier observation (the startup-phase race).
// Ambiguity (errs.ErrUnavailable): an execution may have begun; call again
// (the lost id is simply skipped).
func (s *Store) BeginExecution(ctx context.Context, table, jobID string) (Execution, error) {
	a, err := s.casAdmission(ctx, table, "begin catch-up execution",
		func(a *admissionRecord) error {
			if err := checkOpen(table, a); err != nil {
				return err
			}
			if a.JobID != jobID {
				return fmt.Errorf("table %s is admitted for job %s, not %s: %w", table, a.JobID, jobID, ErrWrongExecution)
			}
			return nil
		},
		func(a *admissionRecord) { a.ExecID++; a.ExecStartedAt = s.now() })
	if err != nil {
		return Execution{}, err
	}
	return Execution{Table: table, JobID: jobID, ExecID: a.ExecID}, nil
}

// CheckAdmission checks, with a linearizable read, that table's admission
// is open and execID is its current execution; the executor calls it
// before every commit. nil, ErrAdmissionClosed, ErrWrongExecution, or an
// errs.ErrUnavailable / context error that proves nothing: the executor
// must not commit on it. A nil answer does not stop a cancellation that
// follows it; the replacement's fence (rule 4) is what keeps that safe.
func (s *Store) CheckAdmission(ctx context.Context, table string, execID uint64) error {
	a, _, err := s.readAdmission(ctx, table)
	if err != nil {
		return err
	}
	return checkExec(table, a, execID)
}

// RecordProgress records one completed non-empty batch or one successful
// manifest commit of execution execID, after the fact, in a transaction
// guarded by open admission and the execution id, and returns the new
// progress sequence. Any other kind is errs.ErrInvalid (heartbeats,
// conflicts and errors are not progress). A closed admission or a newer
// execution fails with ErrAdmissionClosed / ErrWrongExecution: the
// executor stops. Ambiguity (errs.ErrUnavailable): the event may be
// counted or not; recording it again at most counts it twice, which only
// keeps a working Job alive.
func (s *Store) RecordProgress(ctx context.Context, table string, execID uint64, kind ProgressKind) (uint64, error) {
	if kind != ProgressBatch && kind != ProgressCommit {
		return 0, fmt.Errorf("progress kind %q: only %q and %q advance progress: %w", kind, ProgressBatch, ProgressCommit, errs.ErrInvalid)
	}
	a, err := s.casAdmission(ctx, table, "record catch-up progress",
		func(a *admissionRecord) error { return checkExec(table, a, execID) },
		func(a *admissionRecord) { a.Seq++; a.LastKind = kind; a.LastProgressAt = s.now() })
	return a.Seq, err
}

// Heartbeat records that execution execID is alive, for status output
// only: it is written to its own key, so it neither advances progress nor
// defeats a cancellation. It fails like CheckAdmission when the execution
// is no longer admitted. Idempotent.
func (s *Store) Heartbeat(ctx context.Context, table string, execID uint64) error {
	a, kv, err := s.readAdmission(ctx, table)
	if err != nil {
		return err
	}
	if err := checkExec(table, a, execID); err != nil {
		return err
	}
	hb := heartbeatRecord{hdr(KindHeartbeat), table, a.JobID, execID, s.now()}
	_, err = s.txn(ctx, "record catch-up heartbeat",
		[]clientv3.Cmp{revGuard(s.k.admission(table), kv.ModRevision)},
		clientv3.OpPut(s.k.heartbeat(table), encode(KindHeartbeat, hb)))
	return err
}
