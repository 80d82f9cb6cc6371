package coord

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/errs"
)

// KindStop is the record of a table stopped by a storage failure.
const KindStop = "storage-stop"

// ErrTableStopped is a table a failed fsync stopped for the whole fleet
// (DESIGN.md §3 rule 24): what the fsync covered may be lost, and another
// process's successful fsync proves nothing, so no claim is granted, no
// holder commits, fences or trims, until an operator repairs the storage
// and resumes the table with an audited command. A data-integrity error
// (exit 6).
var ErrTableStopped = fmt.Errorf("table stopped by a storage failure: %w", errs.ErrCorrupt)

// ErrStopChanged is a stop record that is not the one the caller read.
var ErrStopChanged = fmt.Errorf("stop record changed: %w", errs.ErrConflict)

// StopRecord says why and by whom a table was stopped.
type StopRecord struct {
	Table string `json:"table"`
	// Reason is the failure as its process met it: the file or directory
	// and the errno.
	Reason string `json:"reason"`
	// Owner is the process that met it.
	Owner Owner     `json:"owner"`
	At    time.Time `json:"at"`
}

// StopInfo is a stop record with the revision it was written at.
type StopInfo struct {
	StopRecord
	Revision int64 `json:"revision"`
}

type stopRecord struct {
	header
	StopRecord
}

// StopError is the error of a table the fleet-wide stop record names.
// errors.Is matches ErrTableStopped and errs.ErrCorrupt.
type StopError struct{ Info StopInfo }

func (e *StopError) Error() string {
	return fmt.Sprintf("table %s: %v since %s (by %s: %s); repair the storage, then run `walctl table resume --table %s --reason ...`",
		e.Info.Table, ErrTableStopped, e.Info.At.Format(time.RFC3339), e.Info.Owner, e.Info.Reason, e.Info.Table)
}

func (e *StopError) Unwrap() error { return ErrTableStopped }

// StopKey returns the etcd key of table's storage-stop record.
func (c *Client) StopKey(table string) string { return c.prefix + "/stopped/" + table }

func (c *Client) stopsDir() string { return c.prefix + "/stopped/" }

// RecordStop stops table for the whole fleet: it creates the table's stop
// record unless one exists (the first failure is kept) and returns the
// record in force. The record has no lease: it outlives every process and
// is removed only by Resume. On ErrUnavailable the outcome is unknown:
// call it again.
func (c *Client) RecordStop(ctx context.Context, rec StopRecord) (StopInfo, error) {
	if err := ValidateTable(rec.Table); err != nil {
		return StopInfo{}, err
	}
	if rec.At.IsZero() {
		rec.At = c.clock.Now().UTC()
	}
	k := c.StopKey(rec.Table)
	cctx, cancel := c.callCtx(ctx)
	resp, err := c.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, mustJSON(stopRecord{header{KindStop, SchemaVersion}, rec}))).
		Else(clientv3.OpGet(k)).
		Commit()
	cancel()
	if err != nil {
		return StopInfo{}, c.unavailable(ctx, "record the storage stop of table "+rec.Table+" (outcome unknown)", err)
	}
	if resp.Succeeded {
		return StopInfo{StopRecord: rec, Revision: resp.Header.Revision}, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 { // resumed in between: record again
		return c.RecordStop(ctx, rec)
	}
	return decodeStop(k, kvs[0].Value, kvs[0].ModRevision)
}

// Stopped returns table's stop record, or nil when the table is not
// stopped (a linearizable read).
func (c *Client) Stopped(ctx context.Context, table string) (*StopInfo, error) {
	if err := ValidateTable(table); err != nil {
		return nil, err
	}
	k := c.StopKey(table)
	cctx, cancel := c.callCtx(ctx)
	resp, err := c.cli.Get(cctx, k)
	cancel()
	if err != nil {
		return nil, c.unavailable(ctx, "read the storage stop of table "+table, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	info, err := decodeStop(k, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	return &info, err
}

// Stops lists every stopped table, by name.
func (c *Client) Stops(ctx context.Context) ([]StopInfo, error) {
	cctx, cancel := c.callCtx(ctx)
	resp, err := c.cli.Get(cctx, c.stopsDir(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	cancel()
	if err != nil {
		return nil, c.unavailable(ctx, "read storage stops", err)
	}
	out := []StopInfo{}
	for _, kv := range resp.Kvs {
		info, err := decodeStop(string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

func decodeStop(key string, data []byte, rev int64) (StopInfo, error) {
	var r stopRecord
	if err := decodeRecord(key, data, KindStop, &r); err != nil {
		return StopInfo{}, err
	}
	return StopInfo{StopRecord: r.StopRecord, Revision: rev}, nil
}

// ResumeRequest names the stop an operator lifts, and why.
type ResumeRequest struct {
	Table  string
	Actor  string
	Reason string
	// ExpectRevision, if not 0, must be the stop record's revision (as
	// shown by Stopped): a later record is not lifted unseen.
	ExpectRevision int64
}

// ResumeResult is the lifted stop and its audit record.
type ResumeResult struct {
	Stop     StopInfo `json:"stop"`
	AuditKey string   `json:"audit_key"`
	Revision int64    `json:"revision"`
}

// Resume lifts table's storage stop: in one transaction it deletes the
// stop record (compared by revision) and writes an audit record naming the
// actor, the reason and the stop as it was. A table that is not stopped is
// ErrNotFound; a record changed since it was read is ErrClaimChanged.
func (c *Client) Resume(ctx context.Context, req ResumeRequest) (ResumeResult, error) {
	if err := ValidateTable(req.Table); err != nil {
		return ResumeResult{}, err
	}
	if req.Actor == "" || req.Reason == "" {
		return ResumeResult{}, fmt.Errorf("resume table %s: an actor and a reason are required (they are audited): %w", req.Table, errs.ErrInvalid)
	}
	st, err := c.Stopped(ctx, req.Table)
	if err != nil {
		return ResumeResult{}, err
	}
	if st == nil {
		return ResumeResult{}, fmt.Errorf("table %s is not stopped: %w", req.Table, errs.ErrNotFound)
	}
	if req.ExpectRevision != 0 && st.Revision != req.ExpectRevision {
		return ResumeResult{}, fmt.Errorf("table %s: stop record is revision %d, not the expected %d: %w", req.Table, st.Revision, req.ExpectRevision, ErrStopChanged)
	}
	now := c.clock.Now().UTC()
	ak := c.auditKey(now, req.Table)
	audit := auditRecord{header{KindAudit, SchemaVersion}, AuditRecord{
		Action: "resume-table", Table: req.Table, Actor: req.Actor, Reason: req.Reason, At: now, Stop: &st.StopRecord,
	}}
	k := c.StopKey(req.Table)
	cctx, cancel := c.callCtx(ctx)
	resp, err := c.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", st.Revision),
			clientv3.Compare(clientv3.CreateRevision(ak), "=", 0)).
		Then(clientv3.OpDelete(k), clientv3.OpPut(ak, mustJSON(audit))).
		Commit()
	cancel()
	if err != nil {
		return ResumeResult{}, c.unavailable(ctx, "resume table "+req.Table+" (outcome unknown: read its stop again)", err)
	}
	if !resp.Succeeded {
		return ResumeResult{}, fmt.Errorf("table %s: stop record changed before it could be lifted: %w", req.Table, ErrStopChanged)
	}
	return ResumeResult{Stop: *st, AuditKey: ak, Revision: resp.Header.Revision}, nil
}
