package cmdutil

import (
	"time"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/worker"
)

// Global settings, bound to persistent flags on the root command.
const (
	KeyConfig         = "config"
	KeyEtcdEndpoints  = "etcd-endpoints"
	KeyEtcdPrefix     = "etcd-prefix"
	KeyEmbedded       = "embedded"
	KeyDataDir        = "data-dir"
	KeyOutput         = "output"
	KeyLogLevel       = "log-level"
	KeyCommandTimeout = "command-timeout"
	KeyWAL            = "wal"
	KeyWALToken       = "wal-token"
	KeyLanceRoot      = "lance-root"
)

// WAL settings. They are flat keys (not "wal.…") because "wal" itself is the
// server address.
const (
	KeyWALMaxGenerationBytes = "wal-generation-bytes"
	KeyWALMaxGenerationAge   = "wal-generation-age"
	KeyWALTLS                = "wal-tls"
	KeyWALCAFile             = "wal-ca-file"
	KeyWALConns              = "wal-conns"
	// KeyWALGroups names the replicated WAL groups and their members' client
	// addresses: "g1=host:port,host:port,host:port;g2=…" (DESIGN.md §6).
	KeyWALGroups = "wal-groups"
)

// Publication settings shared by worker run, prepare, publish, quickstart
// and catch-up.
const (
	KeyClaimTTL           = "claim-ttl"
	KeyPlanMaxBytes       = "publication.max_bytes"
	KeyPlanMaxGenerations = "publication.max_generations"
	KeyFileBytes          = "publication.file_bytes"
	KeyMemoryBudget       = "worker.memory_budget"
	KeyPipeline           = "worker.publication.pipeline_preparation"
)

// Worker settings (`walctl worker run`).
const (
	KeyWorkerTables        = "worker.tables"
	KeyWorkerMaxTables     = "worker.max_tables"
	KeyWorkerMaxRounds     = "worker.max_rounds"
	KeyWorkerPoll          = "worker.poll_interval"
	KeyWorkerSliceTime     = "worker.slice_duration"
	KeyWorkerSliceRounds   = "worker.slice_rounds"
	KeyWorkerIdleRounds    = "worker.idle_release_rounds"
	KeyWorkerGrace         = "worker.shutdown_grace"
	KeyWorkerMetricsListen = "worker.metrics_listen"
	KeyWorkerLostBackoff   = "worker.lost_backoff"
	KeyWorkerErrBackoff    = "worker.error_backoff"
)

// Groups of settings, for the flags of the verbs they affect.
var (
	// WALEngineKeys shape the in-process WAL engine: flags of every verb
	// that appends to or serves it.
	WALEngineKeys = []string{KeyWALMaxGenerationBytes, KeyWALMaxGenerationAge}
	// PublicationKeys shape a publication round: flags of every verb that
	// publishes.
	PublicationKeys = []string{KeyClaimTTL, KeyPlanMaxBytes, KeyPlanMaxGenerations, KeyFileBytes, KeyMemoryBudget, KeyPipeline}
)

// The settings of the command layer, in one place. An int64 setting is a
// size: it accepts 64MiB, 1GB or plain bytes wherever it is given (the
// parser of ByteSize). The catch-up and master settings are registered by
// their packages through Register, into the same registry.
func init() {
	Register(
		Setting{Key: KeyConfig, Flag: KeyConfig, Default: "", Usage: "config file (YAML; default $XDG_CONFIG_HOME/walctl/config.yaml when present)"},
		Setting{Key: KeyEtcdEndpoints, Flag: KeyEtcdEndpoints, Default: []string{}, Usage: "etcd endpoints, comma separated (none: the embedded etcd under the data dir)"},
		Setting{Key: KeyEtcdPrefix, Flag: KeyEtcdPrefix, Default: "/walctl/v1", Usage: "key prefix of walctl's records in etcd"},
		Setting{Key: KeyEmbedded, Flag: KeyEmbedded, Default: false, Usage: "use an in-process etcd on loopback under <data-dir>/etcd, even when endpoints are configured"},
		Setting{Key: KeyDataDir, Flag: KeyDataDir, Default: "", Usage: "directory for the local WAL, embedded etcd and tables (default $XDG_DATA_HOME/walctl or ~/.local/share/walctl)"},
		Setting{Key: KeyOutput, Flag: KeyOutput, Default: "table", Usage: "output format: table|json"},
		Setting{Key: KeyLogLevel, Flag: KeyLogLevel, Default: "info", Usage: "log level: debug|info|warn|error"},
		Setting{Key: KeyCommandTimeout, Flag: KeyCommandTimeout, Default: 30 * time.Second, Usage: "deadline for each call to a dependency (etcd, WAL, Kubernetes)"},
		Setting{Key: KeyWAL, Flag: KeyWAL, Default: "", Usage: "WAL server address host:port (none: the in-process WAL under <data-dir>/wal)"},
		Setting{Key: KeyWALToken, Flag: "", Secret: true, Default: "", Usage: "bearer token for the WAL server (env WALCTL_WAL_TOKEN or config file)"},
		Setting{Key: KeyLanceRoot, Flag: KeyLanceRoot, Default: "", Usage: "directory of Lance tables (default <data-dir>/tables)"},

		Setting{Key: KeyWALMaxGenerationBytes, Default: int64(wal.DefaultMaxGenerationBytes), Usage: "seal a WAL generation at this size (in-process WAL)"},
		Setting{Key: KeyWALMaxGenerationAge, Default: wal.DefaultMaxGenerationAge, Usage: "seal a WAL generation this long after it opened (in-process WAL)"},
		Setting{Key: KeyWALTLS, Default: false, Usage: "use TLS to reach the WAL server"},
		Setting{Key: KeyWALCAFile, Default: "", Usage: "PEM bundle verifying the WAL server's certificate"},
		Setting{Key: KeyWALConns, Default: 4, Usage: "connections in the WAL client pool (per member of a WAL group)"},
		Setting{Key: KeyWALGroups, Flag: KeyWALGroups, Default: "", Usage: "replicated WAL groups: g1=host:port,host:port,host:port;g2=… (tables are placed in one with table create --group)"},

		Setting{Key: KeyClaimTTL, Default: coord.DefaultClaimTTL, Usage: "lease TTL of a table claim; a holder whose keep-alive is older stops acting"},
		Setting{Key: KeyPlanMaxBytes, Default: int64(publish.DefaultMaxPlanBytes), Usage: "WAL bytes one publication may cover"},
		Setting{Key: KeyPlanMaxGenerations, Default: publish.DefaultMaxPlanGenerations, Usage: "sealed generations one publication may cover"},
		Setting{Key: KeyFileBytes, Default: int64(publish.DefaultFileBytes), Usage: "target size of one Lance data file"},
		Setting{Key: KeyMemoryBudget, Default: int64(1 << 30), Usage: "memory budget shared by all tables of a process (fetched entries and encoder workspace)"},
		Setting{Key: KeyPipeline, Default: false, Usage: "experimental: stream decoded WAL entries into several Lance file writers of a plan at once instead of fetching each file whole first"},

		Setting{Key: KeyWorkerTables, Default: []string{}, Usage: "the application-authorized fixed set of tables this worker publishes"},
		Setting{Key: KeyWorkerMaxTables, Default: 0, Usage: "tables held at once (0: all of them)"},
		Setting{Key: KeyWorkerMaxRounds, Default: 0, Usage: "publication rounds running at once (0: GOMAXPROCS)"},
		Setting{Key: KeyWorkerPoll, Default: worker.DefaultPollInterval, Usage: "how often an idle or busy table is looked at again"},
		Setting{Key: KeyWorkerSliceTime, Default: worker.DefaultSliceDuration, Usage: "a claim is released after this long (bounded slices)"},
		Setting{Key: KeyWorkerSliceRounds, Default: 0, Usage: "a claim is released after this many rounds (0: no round limit)"},
		Setting{Key: KeyWorkerIdleRounds, Default: worker.DefaultIdleReleaseRounds, Usage: "a claim is released after this many consecutive idle rounds"},
		Setting{Key: KeyWorkerGrace, Default: worker.DefaultShutdownGrace, Usage: "how long admitted rounds may run on after SIGTERM"},
		Setting{Key: KeyWorkerMetricsListen, Default: "", Usage: "serve Prometheus metrics on this address (/metrics)"},
		Setting{Key: KeyWorkerLostBackoff, Default: worker.DefaultLostBackoff, Usage: "how long a table is left to others after this worker lost its claim"},
		Setting{Key: KeyWorkerErrBackoff, Default: worker.DefaultErrorBackoff, Usage: "cap of the backoff after transient errors (it doubles from the poll interval)"},
	)
}
