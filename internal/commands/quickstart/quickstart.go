// Package quickstart implements `walctl quickstart`: the whole path on the
// embedded default in one command.
package quickstart

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
)

// Options of `walctl quickstart`.
type Options struct {
	Table     string
	Records   int
	BatchRows int
	Shards    int

	// Where names the etcd and the WAL used, for the first line; DataDir
	// and LanceRoot are the configured directories.
	Where     string
	DataDir   string
	LanceRoot string
	// Store is the lance root's store (nil: the directory LanceRoot).
	Store objstore.Store
	Say   io.Writer // narration (nil with --output json)

	WAL       func(context.Context) (wal.Log, error)
	Coord     func(context.Context) (*coord.Client, error)
	Publisher func(context.Context, coord.Owner, ...coord.AcquireOption) (*publish.Publisher, error)
	Owner     func(kind string) coord.Owner
	Print     func(any, func() *render.Table) error
	Progress  func() *progress.Reporter
	Now       func() time.Time
}

// Result is the JSON shape of `walctl quickstart`.
type Result struct {
	Table          string             `json:"table"`
	Records        int64              `json:"records"`
	WALBytes       int64              `json:"wal_bytes"`
	FirstID        int64              `json:"first_id"`
	LastID         int64              `json:"last_id"`
	ProduceSeconds float64            `json:"produce_seconds"`
	PublishSeconds float64            `json:"publish_seconds"`
	Version        uint64             `json:"version"`
	Epoch          uint64             `json:"epoch"`
	Watermarks     publish.Watermarks `json:"watermarks"`
	TableRows      int64              `json:"table_rows"`
	Verified       bool               `json:"verified"`
	NextSteps      []string           `json:"next_steps"`
}

// NewCmdQuickstart returns `walctl quickstart`.
func NewCmdQuickstart(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{WAL: f.WAL, Coord: f.Coord, Publisher: f.Publisher, Owner: f.Owner, Print: f.Print, Progress: f.Progress, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "quickstart",
		Short: "Create a demo table, produce records, publish them and verify",
		Long: `Run the whole path on the configured dependencies — with no flags, the
embedded default: an in-process etcd, the local WAL and Lance tables under the
data directory, no set-up. It registers a demo table, produces records with
unique ids into the WAL (ACKed once durable), seals them, publishes them into
Lance exactly as a worker does (claim, epoch, fence, rounds until nothing
sealed is left), reads the table back and checks that every ACKed id is there
exactly once, then prints what to try next. Running it again adds a new range
of ids to the same table.`,
		Example: "  walctl quickstart\n  walctl quickstart --records 1000000 --data-dir /tmp/walctl-demo",
		Args:    cmdutil.ExactArgs(0, "quickstart takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Records < 1 || opts.BatchRows < 1 || opts.Shards < 1 {
				return cmdutil.FlagErrorf("--records, --batch-rows and --shards must be at least 1")
			}
			if err := fill(cmd.Context(), f, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return quickstartRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Table, "table", "quickstart", "demo table name")
	cmd.Flags().IntVar(&opts.Records, "records", 300_000, "records to produce")
	cmd.Flags().IntVar(&opts.BatchRows, "batch-rows", 2_000, "records per WAL entry")
	cmd.Flags().IntVar(&opts.Shards, "shards", 2, "shards of the demo table")
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.PublicationKeys...)
	cmdutil.AddSettingFlags(cmd.Flags(), cmdutil.WALEngineKeys...)
	return cmd
}

func fill(ctx context.Context, f *cmdutil.Factory, opts *Options) error {
	g := f.Global()
	opts.DataDir, opts.LanceRoot = g.DataDir, g.LanceRoot
	var err error
	if opts.Store, err = f.LanceStore(ctx); err != nil {
		return err
	}
	etcd := "etcd " + fmt.Sprint(g.EtcdEndpoints)
	if g.Embedded {
		etcd = "embedded etcd"
	}
	wal := "in " + f.WALDir()
	if g.WAL != "" {
		wal = "server " + g.WAL
	}
	opts.Where = etcd + ", WAL " + wal
	if !f.JSON() {
		opts.Say = f.IOStreams.ErrOut
	}
	return nil
}

func (o *Options) say(format string, a ...any) {
	if o.Say != nil {
		fmt.Fprintf(o.Say, format+"\n", a...)
	}
}

func quickstartRun(ctx context.Context, opts *Options) error {
	opts.say("walctl quickstart: %s, Lance tables in %s", opts.Where, opts.LanceRoot)
	res := Result{Table: opts.Table}
	if _, err := opts.Coord(ctx); err != nil { // etcd is needed to publish: check it before writing anything
		return err
	}
	log, info, err := register(ctx, opts)
	if err != nil {
		return err
	}
	opts.say("1/4 table %s registered (%d shards)", opts.Table, info.Shards)

	if err := produce(ctx, opts, log, info, &res); err != nil {
		return err
	}
	opts.say("2/4 produced %s records (%s) into the WAL in %.1fs, every one ACKed once durable; generations sealed",
		humanize.Comma(res.Records), humanize.IBytes(uint64(res.WALBytes)), res.ProduceSeconds)

	if err := publishAll(ctx, opts, &res); err != nil {
		return err
	}
	opts.say("3/4 published them into Lance in %.1fs: version %d, publisher epoch %d", res.PublishSeconds, res.Version, res.Epoch)

	if err := verifyIDs(ctx, opts, &res); err != nil {
		return err
	}
	opts.say("4/4 read back %s rows: every ACKed id %d…%d is in the table exactly once", humanize.Comma(res.TableRows), res.FirstID, res.LastID)
	res.NextSteps = nextSteps(opts)
	return opts.Print(res, func() *render.Table {
		t := render.NewTable("try next")
		for _, s := range res.NextSteps {
			t.Add(s)
		}
		return t
	})
}

// nextSteps are commands to try next, each with the --data-dir it needs
// and the --lance-root when it is not the data dir's default (a bucket):
// without it they would read, or a worker publish into, local tables.
func nextSteps(opts *Options) []string {
	d := " --data-dir " + shellQuote(opts.DataDir)
	if def, _ := filepath.Abs(filepath.Join(opts.DataDir, "tables")); opts.LanceRoot != "" && opts.LanceRoot != def && opts.LanceRoot != filepath.Join(opts.DataDir, "tables") {
		d += " --lance-root " + shellQuote(opts.LanceRoot)
	}
	t := " --table " + opts.Table
	return []string{
		"walctl table read" + t + " --limit 5" + d,
		"walctl epoch show" + t + d,
		"walctl wal stats" + t + d,
		"walctl worker run --tables " + opts.Table + d + "   # and in another terminal: walctl wal load" + t + " --rate 5 --duration 30s" + d,
		"walctl doctor" + d,
	}
}
