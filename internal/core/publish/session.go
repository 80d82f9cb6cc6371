package publish

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"time"

	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/budget"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/digest"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/walcache"
)

// ErrFenced is returned when a newer publisher epoch exists: at the WAL (the
// early abort), in the claim, or in the table's latest version.
var ErrFenced = fmt.Errorf("a newer publisher holds the table: %w", errs.ErrFenced)

// Defaults of Config. A publication's fixed costs (planning and pinning,
// the last files' fsync, verification, the commit and its directory sync,
// the trim) are paid once per plan while its files are written
// concurrently, so plans are large: 1 GiB of WAL, or 256 generations (2 GiB
// of default 8 MiB generations), in 64 MiB files. Memory does not grow
// with the plan: files are fetched and written within the worker's budget.
const (
	DefaultMaxPlanBytes       = 1 << 30
	DefaultMaxPlanGenerations = 256
	DefaultFileBytes          = 64 << 20
	DefaultCommitAttempts     = 8
)

// Config configures a Publisher.
type Config struct {
	// LanceRoot is the directory of tables; table T is <LanceRoot>/T.lance.
	// It is used when Store is nil.
	LanceRoot string
	// Store is the lance root on a store (a directory or an S3 prefix);
	// table T is its T.lance. Nil means the local directory LanceRoot.
	Store objstore.Store
	// Limits bound one plan; zero fields take the defaults.
	Limits Limits
	// FileVersion of the data files of tables walctl creates (the zero value
	// is lance.DefaultFileVersion); an existing table keeps its own.
	FileVersion lance.FileVersion
	// Budget is the memory budget shared by every table of the process; nil
	// is unlimited. Fetched WAL entries hold their bytes against it until
	// written, and every open Lance file writer its encoder workspace.
	Budget *budget.Budget
	// Permits bound the concurrent fetch/decode operations of the process,
	// shared like Budget by every table, round and file, in both
	// preparation modes (nil: a pool of budget.DefaultPermits for this
	// Publisher).
	Permits *budget.Permits
	// Cache, when set, serves WAL reads of preparation from decoded entries
	// it holds and keeps what it reads (the catch-up executor's
	// catchup.cache_bytes); its entries hold bytes against Budget too.
	Cache *walcache.Cache
	// PipelinePreparation selects streamed preparation: WAL entries flow, as
	// they are decoded, through bounded streams into up to StreamFiles Lance
	// file writers of the plan at once, instead of each file's entries being
	// fetched whole before its writer starts. Same plan, same files' ranges
	// and content, same complete descriptor set. Experimental, default off.
	PipelinePreparation bool
	// StreamFiles bounds the files of one plan written concurrently in
	// streamed mode (DefaultStreamFiles if <= 0).
	StreamFiles int
	// BufferedFiles bounds the files of one plan written concurrently in
	// buffered mode (DefaultBufferedFiles if <= 0), each holding its
	// range's entries against Budget.
	BufferedFiles int
	// CommitAttempts bounds the commit retries of one round.
	CommitAttempts int
	// Owner identifies this publisher in claims and records.
	Owner coord.Owner
	// Execution, when set, names the catch-up execution committing (it is
	// known only once the execution has begun); it is recorded with every
	// commit beside Owner.
	Execution func() string
	// ClaimOptions are passed to every claim acquisition (TTL, slice).
	ClaimOptions []coord.AcquireOption
	// CommitGuard, when set, runs immediately before every commit attempt
	// (fence and data) and before a round advances the publisher epoch
	// (not Acquire's advance, which takes the ownership); an error aborts
	// before anything is linked or advanced. The catch-up executor checks
	// its admission there (DESIGN.md §3 rule 15).
	CommitGuard func(ctx context.Context, table string) error
	// Clock and Logger; defaults are the real clock and a discarding logger.
	Clock  clock.Clock
	Logger *slog.Logger

	hooks *prepareHooks // tests only
}

// Publisher publishes tables from one WAL into Lance, coordinated by etcd.
type Publisher struct {
	log     wal.Log
	coord   *coord.Client
	cfg     Config
	stopped stopped // tables a failed fsync stopped
}

// New returns a publisher.
func New(log wal.Log, co *coord.Client, cfg Config) *Publisher {
	if cfg.Limits.MaxBytes <= 0 {
		cfg.Limits.MaxBytes = DefaultMaxPlanBytes
	}
	if cfg.Limits.MaxGenerations <= 0 {
		cfg.Limits.MaxGenerations = DefaultMaxPlanGenerations
	}
	if cfg.Limits.FileBytes <= 0 {
		cfg.Limits.FileBytes = DefaultFileBytes
	}
	if cfg.CommitAttempts <= 0 {
		cfg.CommitAttempts = DefaultCommitAttempts
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Permits == nil {
		cfg.Permits = budget.NewPermits(budget.DefaultPermits)
	}
	if cfg.BufferedFiles <= 0 {
		cfg.BufferedFiles = DefaultBufferedFiles
	}
	if cfg.StreamFiles <= 0 {
		cfg.StreamFiles = DefaultStreamFiles
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Store == nil {
		cfg.Store = objstore.NewLocal(cfg.LanceRoot)
	}
	p := &Publisher{log: log, coord: co, cfg: cfg}
	if co != nil {
		p.stopped.record, p.stopped.clock = p.recordStop, cfg.Clock
	}
	return p
}

// TablePath names where table lives (a directory, or s3://…).
func (p *Publisher) TablePath(table string) string {
	return p.TableStore(table).String()
}

// TableStore is the store of table's dataset.
func (p *Publisher) TableStore(table string) objstore.Store {
	return p.cfg.Store.Sub(table + ".lance")
}

// OpenTable opens table's dataset read-only (lance.ErrDatasetNotFound when
// nothing was published into it yet).
func (p *Publisher) OpenTable(table string) (*lance.Dataset, error) {
	return lance.OpenStore(p.TableStore(table))
}

// LatestWatermarks returns the watermarks of the table's latest version
// under the publisher's Lance root (see the function LatestWatermarks).
func (p *Publisher) LatestWatermarks(table string) (Watermarks, error) {
	return LatestWatermarksOn(p.cfg.Store, table)
}

// Session is one ownership of one table: a claim and the publisher epoch
// fenced under it. It is used by one goroutine at a time.
type Session struct {
	p      *Publisher
	table  string
	claim  *coord.Claim
	epoch  uint64
	fenced bool
	ds     *lance.Dataset
	store  *Store
	hash   digest.Hash // the table's row hash, once read (rowHash)
	rounds int
	log    *slog.Logger
}

// Acquire claims table and, if there is anything to publish (a pinned plan
// that starts at the table's watermarks, or sealed WAL entries above them),
// advances its publisher epoch (rule 3: read the WAL epoch e, validate the
// claim, CAS e → e+1 in the WAL, record e+1 in the claim guarded by its
// CreateRevision). With nothing to publish the epoch is left alone: the
// first round that finds work advances it. It does not fence the table
// yet: the first round with work does. If another holder has the claim it
// fails with coord.ErrClaimed (or ErrReserved); a table stopped by a
// failed fsync in this process fails with ErrStorageFailed, unclaimed. On
// any failure after the claim was taken, the claim is released.
func (p *Publisher) Acquire(ctx context.Context, table string) (*Session, error) {
	if err := wal.ValidateName(table); err != nil {
		return nil, err
	}
	if err := p.stopped.check(table); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := p.log.Table(cctx, table); err != nil {
		return nil, err
	}
	claim, err := p.coord.Acquire(ctx, table, p.cfg.Owner, p.cfg.ClaimOptions...)
	if err != nil {
		return nil, err
	}
	s := &Session{p: p, table: table, claim: claim, log: p.cfg.Logger.With("table", table)}
	// The probe only spares an idle table the epoch advance: when it fails
	// (the table and the WAL disagree, a dependency is down) the epoch is
	// advanced as for work, and the first round fails loudly with the cause.
	if work, perr := s.probe(ctx, &Result{}); perr != nil || work {
		err = s.advanceEpoch(ctx)
	}
	if err != nil {
		err = p.stopped.note(table, err) // recorded for the fleet before the claim goes
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), coord.DefaultCallTimeout)
		defer cancel()
		_ = s.Release(rctx)
		return nil, err
	}
	return s, nil
}

func (s *Session) advanceEpoch(ctx context.Context) error {
	for try := 0; ; try++ {
		e, err := s.p.log.Epoch(ctx, s.table)
		if err != nil {
			return err
		}
		if err := s.claim.Valid(ctx); err != nil {
			return err
		}
		next, err := s.p.log.AdvanceEpoch(ctx, s.table, e)
		if errors.Is(err, wal.ErrEpochConflict) && try < 3 {
			continue // an expiring holder moved it meanwhile: read again
		}
		if err != nil {
			return fmt.Errorf("advance publisher epoch of %s from %d: %w", s.table, e, err)
		}
		if err := failpoint.Inject(ctx, failpoint.AfterEpochAdvance, 0); err != nil {
			return err
		}
		if err := s.claim.SetEpoch(ctx, next); err != nil {
			return err
		}
		s.epoch = next
		s.log.Info("publisher epoch advanced", "epoch", next)
		return nil
	}
}

// Table is the session's table.
func (s *Session) Table() string { return s.table }

// Epoch is the session's publisher epoch; 0 while no round has found
// anything to publish (the epoch is advanced only when there is work).
func (s *Session) Epoch() uint64 { return s.epoch }

// Claim is the session's claim.
func (s *Session) Claim() *coord.Claim { return s.claim }

// Rounds is the number of rounds run.
func (s *Session) Rounds() int { return s.rounds }

// SliceOver reports whether the claim's bounded slice has ended.
func (s *Session) SliceOver() bool { return s.claim.SliceOver(s.rounds) }

// Release releases the claim (revoking its lease). The epoch stays: the next
// owner advances it.
func (s *Session) Release(ctx context.Context) error {
	// A failed fsync whose fleet-wide stop is not in etcd yet: the claim is
	// what keeps every other process off the table meanwhile (rule 24).
	if e := s.p.stopped.get(s.table); e != nil && !e.Recorded() {
		if err := e.waitRecorded(ctx); err != nil {
			return fmt.Errorf("table %s: the claim is kept until the storage stop is recorded in etcd (%v): %w", s.table, err, e)
		}
	}
	return s.claim.Release(ctx)
}

// dataset opens (or creates) the table's Lance dataset and wires the
// failpoints into its commit path.
func (s *Session) dataset(ctx context.Context) (*lance.Dataset, error) {
	if s.ds != nil {
		return s.ds, nil
	}
	ts := s.p.TableStore(s.table)
	ds, err := lance.OpenStore(ts)
	if errors.Is(err, lance.ErrDatasetNotFound) {
		info, terr := s.p.log.Table(ctx, s.table)
		if terr != nil {
			return nil, terr
		}
		ds, err = lance.CreateStore(ts, info.Schema, lance.CreateOptions{FileVersion: s.p.cfg.FileVersion, TxnID: newID()})
		if errors.Is(err, lance.ErrDatasetExists) {
			ds, err = lance.OpenStore(ts)
		}
	}
	if err != nil {
		return nil, err
	}
	// A layout whose creator died before its syncs is made durable before
	// anything is committed on it.
	if err := ds.SyncLayout(); err != nil {
		return nil, err
	}
	ds.Hooks = lance.Hooks{
		// The version is the points' argument: a publisher links a fence
		// before its data commit, and @N lets a test pick the one it means.
		BeforeLink: func(ctx context.Context, v uint64) error {
			return failpoint.Inject(ctx, failpoint.BeforeManifestLink, int(v))
		},
		AfterLinkBeforeDirSync: func(ctx context.Context, v uint64) error {
			return failpoint.Inject(ctx, failpoint.AfterLinkBeforeDirSync, int(v))
		},
	}
	s.ds, s.store = ds, NewStoreOn(ts)
	return ds, nil
}

// fence makes the table's latest version carry this session's epoch with a
// config-only commit (rule 4: against the exact parent N, epoch(N) < mine).
// A version already at this epoch needs no new fence; a newer epoch means
// this session is fenced out.
func (s *Session) fence(ctx context.Context) error {
	ds, err := s.dataset(ctx)
	if err != nil {
		return err
	}
	for attempt := 0; attempt < s.p.cfg.CommitAttempts; attempt++ {
		if err := s.claim.Valid(ctx); err != nil { // with the storage stop (rule 24)
			return err
		}
		m, err := ds.Latest()
		if err != nil {
			return err
		}
		st, err := ParseState(m.Config)
		if err != nil {
			return err
		}
		switch {
		case st.Epoch == s.epoch:
			s.fenced = true
			s.abortDeadUploads(ctx)
			return nil
		case st.Epoch > s.epoch:
			return fmt.Errorf("table %s version %d is fenced at epoch %d, this publisher has %d: %w", s.table, m.Version, st.Epoch, s.epoch, ErrFenced)
		}
		if err := s.commitGuard(ctx); err != nil {
			return err
		}
		_, err = ds.Commit(ctx, lance.CommitRequest{
			ParentVersion: m.Version,
			Kind:          lance.ConfigOnly,
			ConfigSet:     s.committer().delta(fenceDelta(s.epoch)),
			TxnID:         newID(),
			Now:           s.p.cfg.Clock.Now,
			Check: func(parent *lance.Manifest) error {
				ps, err := ParseState(parent.Config)
				if err != nil {
					return err
				}
				if ps.Epoch >= s.epoch {
					return fmt.Errorf("fence at epoch %d refused: version %d has epoch %d: %w", s.epoch, parent.Version, ps.Epoch, ErrFenced)
				}
				return nil
			},
		})
		if errors.Is(err, durable.ErrSyncFailed) {
			return err // never re-read and trust a version a failed fsync covered
		}
		if errors.Is(err, lance.ErrCommitConflict) || errors.Is(err, lance.ErrCommitUnknown) {
			continue // re-read: either someone committed, or our fence did
		}
		if err != nil {
			return err
		}
		s.log.Info("table fenced", "epoch", s.epoch, "parent", m.Version)
		s.fenced = true
		s.abortDeadUploads(ctx)
		return nil
	}
	return fmt.Errorf("fence %s: still contended after %d attempts: %w", s.table, s.p.cfg.CommitAttempts, errs.ErrConflict)
}

// commitGuard runs the caller's CommitGuard, if any.
func (s *Session) commitGuard(ctx context.Context) error {
	if g := s.p.cfg.CommitGuard; g != nil {
		return g(ctx, s.table)
	}
	return nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Session) now() time.Time { return s.p.cfg.Clock.Now() }

// committer is who this session's commits record.
func (s *Session) committer() Committer {
	o := s.p.cfg.Owner
	c := Committer{ID: o.ID, Kind: o.Kind, JobID: o.JobID}
	if s.p.cfg.Execution != nil {
		c.Execution = s.p.cfg.Execution()
	}
	return c
}
