package worker

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Defaults for Config fields left zero.
const (
	DefaultPollInterval      = time.Second
	DefaultIdleReleaseRounds = 10
	DefaultSliceDuration     = 5 * time.Minute
	DefaultErrorBackoff      = 30 * time.Second
	DefaultCorruptBackoff    = 2 * time.Minute
	DefaultMaxCorruptBackoff = time.Hour
	DefaultLostBackoff       = 10 * time.Second
	DefaultShutdownGrace     = 25 * time.Second
	DefaultReleaseTimeout    = 10 * time.Second
)

// IdlePolicy says when a holder gives up a table that has had nothing to
// publish: after MaxRounds consecutive idle rounds or after MaxDuration of
// consecutive idleness (injected clock), whichever comes first. Zero fields
// are unbounded; a zero IdlePolicy takes DefaultIdleReleaseRounds.
type IdlePolicy struct {
	MaxRounds   int
	MaxDuration time.Duration
}

// Config is the typed configuration of a Worker.
type Config struct {
	// Tables is the application-authorized fixed set of tables this worker
	// may publish. Names are validated by Run; duplicates are refused.
	Tables []string
	// MaxConcurrentTables bounds the tables held (claimed) at once; a table
	// waits for a slot before it tries to claim. Default: len(Tables).
	MaxConcurrentTables int
	// MaxConcurrentRounds bounds publication rounds running at once across
	// all tables. Default: GOMAXPROCS.
	MaxConcurrentRounds int
	// PollInterval is how long an idle or busy table waits before it is
	// looked at again, and the first step of the transient-error backoff.
	// Default 1s.
	PollInterval time.Duration
	// IdleRelease releases a held claim once the table has been idle long
	// enough, so that ownership can move. An unclaimed table is claimed
	// only when the WAL shows sealed work above its watermarks (those last
	// seen, or read from the table's latest Lance version), so an idle table
	// is not claimed and fenced — a Lance version each time — over and over.
	IdleRelease IdlePolicy
	// Slice bounds how long a claim is held (rounds, or time on Clock); the
	// worker releases at its end even with work pending, then competes for
	// the table again after PollInterval. It applies in addition to any
	// slice the Publisher's own claim options set. Default: 5 minutes.
	Slice coord.SlicePolicy
	// ErrorBackoff caps the backoff after transient errors (etcd or WAL
	// unavailable, Lance commit contention), which doubles from
	// PollInterval. The claim is kept meanwhile. Default 30s.
	ErrorBackoff time.Duration
	// CorruptBackoff is the first wait after a data-integrity error
	// (errs.ErrCorrupt, e.g. publish.ErrWatermarkBehindTrim) or a table
	// that is unknown or invalid; the claim is released and the wait
	// doubles up to MaxCorruptBackoff while the error persists. Defaults
	// 2 minutes and 1 hour.
	CorruptBackoff    time.Duration
	MaxCorruptBackoff time.Duration
	// LostBackoff is how long the worker leaves a table to others after
	// losing its claim (revoked, expired, or fenced by a newer epoch), so
	// that a revocation actually moves the table; a table nobody else takes
	// is claimed again after it. Default 10s.
	LostBackoff time.Duration
	// ShutdownGrace is how long rounds admitted before shutdown may run on
	// after Run's context is cancelled; then their context is cancelled too
	// (they stop at the next step, and a commit in flight is resolved by
	// the next owner, DESIGN.md §3 rule 6). Negative: no limit. Default 25s.
	ShutdownGrace time.Duration
	// ReleaseTimeout bounds releasing one claim (revoking its lease) after
	// its table loop ends, including at shutdown. Default 10s.
	ReleaseTimeout time.Duration
	// Log is the WAL the Publisher was built on. Required: the worker asks
	// it (Stats) for the sealed work pending above the watermarks once per
	// non-idle round (the lag metric) and at every look at an unclaimed
	// table.
	Log wal.Log
	// Clock drives every wait of the worker (default the real clock).
	Clock clock.Clock
	// Logger receives structured logs (default: discarded).
	Logger *slog.Logger
	// Metrics receives the worker's metrics (default: unregistered ones).
	Metrics *Metrics
}

// withDefaults validates cfg and fills zero fields. Errors wrap
// errs.ErrInvalid.
func (cfg Config) withDefaults() (Config, error) {
	if len(cfg.Tables) == 0 {
		return cfg, fmt.Errorf("worker: no tables configured: %w", errs.ErrInvalid)
	}
	seen := map[string]bool{}
	for _, t := range cfg.Tables {
		if err := coord.ValidateTable(t); err != nil {
			return cfg, fmt.Errorf("worker: %w", err)
		}
		if seen[t] {
			return cfg, fmt.Errorf("worker: table %s is listed twice: %w", t, errs.ErrInvalid)
		}
		seen[t] = true
	}
	if cfg.Log == nil {
		return cfg, fmt.Errorf("worker: Config.Log (the publisher's WAL) is required: %w", errs.ErrInvalid)
	}
	if cfg.MaxConcurrentTables <= 0 {
		cfg.MaxConcurrentTables = len(cfg.Tables)
	}
	if cfg.MaxConcurrentRounds <= 0 {
		cfg.MaxConcurrentRounds = max(1, runtime.GOMAXPROCS(0))
	}
	cfg.PollInterval = orDefault(cfg.PollInterval, DefaultPollInterval)
	if cfg.IdleRelease == (IdlePolicy{}) {
		cfg.IdleRelease.MaxRounds = DefaultIdleReleaseRounds
	}
	if cfg.Slice == (coord.SlicePolicy{}) {
		cfg.Slice.MaxDuration = DefaultSliceDuration
	}
	cfg.ErrorBackoff = max(orDefault(cfg.ErrorBackoff, DefaultErrorBackoff), cfg.PollInterval)
	cfg.CorruptBackoff = orDefault(cfg.CorruptBackoff, DefaultCorruptBackoff)
	cfg.MaxCorruptBackoff = max(orDefault(cfg.MaxCorruptBackoff, DefaultMaxCorruptBackoff), cfg.CorruptBackoff)
	cfg.LostBackoff = orDefault(cfg.LostBackoff, DefaultLostBackoff)
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	cfg.ReleaseTimeout = orDefault(cfg.ReleaseTimeout, DefaultReleaseTimeout)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return cfg, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
