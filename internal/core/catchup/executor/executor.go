// Package executor is `walctl catchup run`: the dedicated catch-up
// executor of one table under one catch-up Job (DESIGN.md §3 rules 14–15,
// issue 7).
//
// The executor claims the table with exactly its Job identity (coord
// refuses any other), begins an execution of the Job's admission, and
// merges sealed WAL serially across the table's shards, one batch at a
// time. A batch is one publication plan bounded by the publisher's Limits
// (64 MiB / 8 generations by default); the Session fences the table on its
// first round and adopts any pinned plan, so work left by an earlier
// execution or a worker is finished rather than redone. Each batch runs in
// two steps so that rule 15's progress is recorded after the fact:
//
//	Prepare   pin or adopt the plan and write (or reuse) its files
//	          → RecordProgress(batch) when this execution wrote files
//	Round     adopt the same plan, reuse the files, CommitGuard, commit
//	          → RecordProgress(commit) when this round committed
//
// The publisher's CommitGuard is Guard, which checks admission in a
// transaction before every commit attempt. The soft slice only stops the
// executor from starting another batch: a batch already prepared is
// committed past it. The executor stops when every shard's watermark has
// reached the last generation that was sealed when it started (live
// producers keep appending meanwhile), when the slice ends, or when
// admission is closed or belongs to another execution.
package executor

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walcache"
)

// Outcome is how an execution ended; its string is part of `walctl
// catchup run --output json`.
type Outcome string

// Outcomes.
const (
	// OutcomeCaughtUp: every shard is published up to what was sealed when
	// the execution started.
	OutcomeCaughtUp Outcome = "caught_up"
	// OutcomeSliceEnded: the soft slice ended; no new batch was started
	// after it (work already admitted finished).
	OutcomeSliceEnded Outcome = "slice_ended"
	// OutcomeAdmissionClosed: the master closed admission (cancelled, or
	// stalled); nothing more was committed.
	OutcomeAdmissionClosed Outcome = "admission_closed"
	// OutcomeWrongExecution: another Job or a newer execution owns the
	// admission; nothing more was committed.
	OutcomeWrongExecution Outcome = "wrong_execution"
	// OutcomeFenced: the claim was lost or a newer publisher epoch fenced
	// this one out.
	OutcomeFenced Outcome = "fenced"
	// OutcomeInterrupted: the process was told to stop (SIGTERM, e.g. the
	// runner terminating the Job); it stopped at the next step.
	OutcomeInterrupted Outcome = "interrupted"
	// OutcomeFailed: any other error.
	OutcomeFailed Outcome = "failed"
)

// Admission is the part of *catchup.Store the executor uses.
type Admission interface {
	BeginExecution(ctx context.Context, table, jobID string) (catchup.Execution, error)
	CheckAdmission(ctx context.Context, table string, execID uint64) error
	RecordProgress(ctx context.Context, table string, execID uint64, kind catchup.ProgressKind) (uint64, error)
	Heartbeat(ctx context.Context, table string, execID uint64) error
}

var _ Admission = (*catchup.Store)(nil)

// Session is the part of *publish.Session the executor uses.
type Session interface {
	Prepare(ctx context.Context) (*publish.Result, error)
	Round(ctx context.Context) (*publish.Result, error)
	Release(ctx context.Context) error
	Epoch() uint64
}

var _ Session = (*publish.Session)(nil)

// Sealed is the part of wal.Log that tells what was sealed at start.
type Sealed interface {
	Stats(ctx context.Context, table string, watermarks map[int]uint64) (wal.TableStats, error)
	Generations(ctx context.Context, table string, shard int) ([]wal.Generation, error)
}

// Config configures one execution.
type Config struct {
	Table string
	JobID string
	// SoftSlice: no batch is started once this much time has passed since
	// the start (0: catchup.DefaultPolicy's).
	SoftSlice time.Duration
	// HeartbeatInterval spaces the status-only heartbeats (0: 30 s).
	HeartbeatInterval time.Duration
	Clock             clock.Clock
	Logger            *slog.Logger
	// OnBatch, when set, is called after every round with its result, for
	// progress display.
	OnBatch func(Batch)
	// Cache, when set, is the publisher's cache of decoded WAL entries
	// (Memory.Cache); its counters go into the report.
	Cache *walcache.Cache
}

// Batch is one merged batch as reported.
type Batch struct {
	Plan      string             `json:"plan"`
	Adopted   bool               `json:"adopted"`
	Reused    bool               `json:"reused"`
	Outcome   publish.Outcome    `json:"outcome"`
	Rows      uint64             `json:"rows"`
	Bytes     int64              `json:"bytes"`
	Version   uint64             `json:"version,omitempty"`
	Watermark publish.Watermarks `json:"watermarks"`
}

// Report is the result of Run (stable JSON of `walctl catchup run`).
type Report struct {
	Table   string  `json:"table"`
	JobID   string  `json:"job_id"`
	ExecID  uint64  `json:"exec_id"`
	Epoch   uint64  `json:"epoch"`
	Outcome Outcome `json:"outcome"`
	// Target is, per shard, the last position sealed at start.
	Target     publish.Watermarks `json:"target"`
	Watermarks publish.Watermarks `json:"watermarks"`
	Batches    []Batch            `json:"batches"`
	// Progress counts the events recorded (batches, commits).
	ProgressBatches int    `json:"progress_batches"`
	ProgressCommits int    `json:"progress_commits"`
	Rows            uint64 `json:"rows"`
	Bytes           int64  `json:"bytes"`
	// Cache is the cache's counters at the end (absent without a cache).
	Cache *walcache.Stats `json:"cache,omitempty"`
	Error string          `json:"error,omitempty"`
}

// Executor runs one execution. Build it with New, hand Guard to the
// publisher's CommitGuard, then call Run once.
type Executor struct {
	cfg    Config
	adm    Admission
	execID atomic.Uint64 // 0 until BeginExecution succeeded
	log    *slog.Logger
}

// New returns an executor for cfg with adm as the admission store.
func New(cfg Config, adm Admission) (*Executor, error) {
	if err := wal.ValidateName(cfg.Table); err != nil {
		return nil, err
	}
	if cfg.JobID == "" {
		return nil, fmt.Errorf("catch-up executor for table %s: no job id: %w", cfg.Table, errs.ErrInvalid)
	}
	if cfg.SoftSlice <= 0 {
		cfg.SoftSlice = catchup.DefaultPolicy().SoftSlice
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 30 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Executor{cfg: cfg, adm: adm, log: cfg.Logger.With("table", cfg.Table, "job", cfg.JobID)}, nil
}

// Guard is the publisher's CommitGuard: before every commit attempt it
// checks, in a transaction, that admission is open and this execution is
// the current one. Before Run has begun an execution it refuses (no
// commit may happen outside an execution). Any error, including an etcd
// outage that proves nothing, aborts the commit.
func (e *Executor) Guard(ctx context.Context, table string) error {
	id := e.execID.Load()
	if id == 0 {
		return fmt.Errorf("table %s: no catch-up execution has begun: %w", table, catchup.ErrAdmissionClosed)
	}
	return e.adm.CheckAdmission(ctx, table, id)
}

// Execution is the id of the running execution ("" before it has begun),
// recorded with every commit so `table history` names it.
func (e *Executor) Execution() string {
	if id := e.execID.Load(); id != 0 {
		return strconv.FormatUint(id, 10)
	}
	return ""
}
