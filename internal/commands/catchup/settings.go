// Package catchup implements `walctl catchup run|submit|status|cancel`:
// the dedicated catch-up executor a Job runs, and the clients of the
// master's catch-up API.
package catchup

import (
	"github.com/walctl/walctl/internal/commands/cmdutil"
	corecatchup "github.com/walctl/walctl/internal/core/catchup"
)

// Catch-up settings (DESIGN.md §4). The policy keys are read by `walctl
// master run`; the executor keys (table, job, soft_slice, batch_*,
// merge_buffer_bytes, cache_bytes) by `walctl catchup run`, whose flags and
// WALCTL_CATCHUP_* variables are exactly what catchup.JobSpec.Args and Env
// produce.
const (
	KeyEnabled          = "catchup.enabled"
	KeyMaxJobs          = "catchup.max_jobs"
	KeyThreshold        = "catchup.threshold_generations"
	KeyStatsMaxAge      = "catchup.stats_max_age"
	KeyObserveInterval  = "catchup.observe_interval"
	KeySoftSlice        = "catchup.soft_slice"
	KeyStartupWindow    = "catchup.startup_window"
	KeyIdle             = "catchup.idle"
	KeyConfirmation     = "catchup.confirmation"
	KeyBatchBytes       = "catchup.batch_bytes"
	KeyBatchGenerations = "catchup.batch_generations"
	KeyMergeBufferBytes = "catchup.merge_buffer_bytes"
	KeyCacheBytes       = "catchup.cache_bytes"
	KeyAttentionAfter   = "catchup.attention_after"
	KeyBackoffMin       = "catchup.backoff_min"
	KeyBackoffMax       = "catchup.backoff_max"
	KeyOwnedTargets     = "catchup.owned_targets"
	KeyTable            = "catchup.table"
	KeyJob              = "catchup.job"

	KeyMasterURL   = "master.url"
	KeyMasterToken = "master.token"
)

func init() {
	d := corecatchup.DefaultPolicy()
	cmdutil.Register(
		cmdutil.Setting{Key: KeyEnabled, Default: d.Enabled, Usage: "admit catch-up Jobs (master; off by default)"},
		cmdutil.Setting{Key: KeyMaxJobs, Default: d.MaxJobs, Usage: "catch-up Jobs running at once across the fleet"},
		cmdutil.Setting{Key: KeyThreshold, Default: d.ThresholdGenerations, Usage: "pending sealed generations at which a table is admitted"},
		cmdutil.Setting{Key: KeyStatsMaxAge, Default: d.StatsMaxAge, Usage: "backlog statistics older than this admit nothing"},
		cmdutil.Setting{Key: KeyObserveInterval, Default: d.ObserveInterval, Usage: "how often the master observes Jobs and scans the backlog"},
		cmdutil.Setting{Key: KeySoftSlice, Default: d.SoftSlice, Usage: "an executor starts no new batch after this long; admitted work finishes"},
		cmdutil.Setting{Key: KeyStartupWindow, Default: d.StartupWindow, Usage: "grace a new Job or execution gets before stall suspicion"},
		cmdutil.Setting{Key: KeyIdle, Default: d.Idle, Usage: "continuous lack of progress before a Job is suspected stalled"},
		cmdutil.Setting{Key: KeyConfirmation, Default: d.Confirmation, Usage: "further lack of progress that confirms a stall"},
		cmdutil.Setting{Key: KeyBatchBytes, Default: d.BatchBytes, Usage: "WAL bytes one catch-up batch merges"},
		cmdutil.Setting{Key: KeyBatchGenerations, Default: d.BatchGenerations, Usage: "sealed generations one catch-up batch merges"},
		cmdutil.Setting{Key: KeyMergeBufferBytes, Default: d.MergeBufferBytes, Usage: "memory budget of a catch-up executor's merge buffers"},
		cmdutil.Setting{Key: KeyCacheBytes, Default: d.CacheBytes, Usage: "shared cache of decoded WAL entries of a catch-up executor, within its memory budget (merge buffer + cache)"},
		cmdutil.Setting{Key: KeyAttentionAfter, Default: d.AttentionAfter, Usage: "consecutive failures after which a table needs attention"},
		cmdutil.Setting{Key: KeyBackoffMin, Default: d.BackoffMin, Usage: "first retry backoff after a failed catch-up"},
		cmdutil.Setting{Key: KeyBackoffMax, Default: d.BackoffMax, Usage: "longest retry backoff after failed catch-ups"},
		cmdutil.Setting{Key: KeyOwnedTargets, Default: []string{}, Usage: "tables this master's fleet catches up (explicit list; claimed is not owned)"},
		cmdutil.Setting{Key: KeyTable, Default: "", Usage: "table the catch-up executor merges"},
		cmdutil.Setting{Key: KeyJob, Default: "", Usage: "catch-up Job identity the executor claims with (set by the master)"},
		cmdutil.Setting{Key: KeyMasterURL, Flag: "master", Default: "", Usage: "URL of the master API (default: the master serving this data dir)"},
		cmdutil.Setting{Key: KeyMasterToken, Secret: true, Default: "", Usage: "bearer token of the master API (env WALCTL_MASTER_TOKEN or config file; never a flag)"},
	)
}

// PolicyFromConfig builds the catch-up policy from the settings (not yet
// normalized; catchup.OpenMaster does that and persists it).
func PolicyFromConfig(c *cmdutil.Config) corecatchup.Policy {
	return corecatchup.Policy{
		Enabled:              c.Bool(KeyEnabled),
		MaxJobs:              c.Int(KeyMaxJobs),
		ThresholdGenerations: c.Int(KeyThreshold),
		StatsMaxAge:          c.Duration(KeyStatsMaxAge),
		ObserveInterval:      c.Duration(KeyObserveInterval),
		SoftSlice:            c.Duration(KeySoftSlice),
		StartupWindow:        c.Duration(KeyStartupWindow),
		Idle:                 c.Duration(KeyIdle),
		Confirmation:         c.Duration(KeyConfirmation),
		BatchBytes:           c.Int64(KeyBatchBytes),
		BatchGenerations:     c.Int(KeyBatchGenerations),
		MergeBufferBytes:     c.Int64(KeyMergeBufferBytes),
		CacheBytes:           c.Int64(KeyCacheBytes),
		AttentionAfter:       c.Int(KeyAttentionAfter),
		BackoffMin:           c.Duration(KeyBackoffMin),
		BackoffMax:           c.Duration(KeyBackoffMax),
		OwnedTargets:         c.StringSlice(KeyOwnedTargets),
	}
}

// PolicyKeys are the settings PolicyFromConfig reads, for flags on
// `master run`.
var PolicyKeys = []string{KeyEnabled, KeyMaxJobs, KeyThreshold, KeyStatsMaxAge, KeyObserveInterval, KeySoftSlice,
	KeyStartupWindow, KeyIdle, KeyConfirmation, KeyBatchBytes, KeyBatchGenerations, KeyMergeBufferBytes, KeyCacheBytes,
	KeyAttentionAfter, KeyBackoffMin, KeyBackoffMax, KeyOwnedTargets}
