// Package quickstart implements `walctl quickstart`: the whole path on the
// embedded default in one command.
package quickstart

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/schemaspec"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/core/worker"
)

// Options of `walctl quickstart`.
type Options struct {
	F         *cmdutil.Factory
	Table     string
	Records   int
	BatchRows int
	Shards    int
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

const schemaJSON = `[{"name": "id", "type": "int64"},
 {"name": "ts", "type": "timestamp[us, UTC]"},
 {"name": "body", "type": "utf8", "nullable": true},
 {"name": "embedding", "type": "fixed_size_list<float32>[32]"}]`

// NewCmdQuickstart returns `walctl quickstart`.
func NewCmdQuickstart(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "quickstart",
		Short: "Create a demo table, produce records, publish them with a worker and verify",
		Long: `Run the whole path on the configured dependencies — with no flags, the
embedded default: an in-process etcd, the local WAL and Lance tables under the
data directory, no set-up. It registers a demo table, produces records with
unique ids into the WAL (ACKed once durable), seals them, runs a worker until
every ACKed record is published into Lance, reads the table back and checks
that every ACKed id is there exactly once, then prints what to try next.
Running it again adds a new range of ids to the same table.`,
		Example: "  walctl quickstart\n  walctl quickstart --records 1000000 --data-dir /tmp/walctl-demo",
		Args:    cmdutil.ExactArgs(0, "quickstart takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Records < 1 || opts.BatchRows < 1 || opts.Shards < 1 {
				return cmdutil.FlagErrorf("--records, --batch-rows and --shards must be at least 1")
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
	return cmd
}

func quickstartRun(ctx context.Context, opts *Options) error {
	f := opts.F
	say := func(format string, a ...any) {
		if !f.JSON() {
			fmt.Fprintf(f.IOStreams.ErrOut, format+"\n", a...)
		}
	}
	g := f.Global()
	where := "etcd " + fmt.Sprint(g.EtcdEndpoints)
	if g.Embedded {
		where = "embedded etcd"
	}
	say("walctl quickstart: %s, WAL %s, Lance tables in %s", where, walWhere(f), g.LanceRoot)

	if _, err := f.Coord(ctx); err != nil { // etcd is needed to publish: check it before writing anything
		return err
	}
	log, err := f.WAL(ctx)
	if err != nil {
		return err
	}
	schema, err := schemaspec.Parse([]byte(schemaJSON))
	if err != nil {
		return err
	}
	info, err := log.CreateTable(ctx, opts.Table, schema, opts.Shards)
	if err != nil {
		return fmt.Errorf("register the demo table: %w", err)
	}
	say("1/4 table %s registered (%d shards)", opts.Table, info.Shards)

	first, err := nextID(ctx, log, g.LanceRoot, opts.Table, info.Shards)
	if err != nil {
		return err
	}
	res := Result{Table: opts.Table, FirstID: first}
	start := f.Now()
	last, bytes, err := produce(ctx, f, log, opts, info, first)
	if err != nil {
		return err
	}
	res.LastID, res.Records, res.WALBytes = last, last-first+1, bytes
	res.ProduceSeconds = f.Now().Sub(start).Seconds()
	say("2/4 produced %s records (%s) into the WAL in %.1fs, every one ACKed once durable; generations sealed",
		humanize.Comma(res.Records), humanize.IBytes(uint64(bytes)), res.ProduceSeconds)

	start = f.Now()
	if err := publishAll(ctx, f, log, opts.Table); err != nil {
		return err
	}
	res.PublishSeconds = f.Now().Sub(start).Seconds()

	r, err := publish.OpenReader(g.LanceRoot, opts.Table, publish.Selection{})
	if err != nil {
		return err
	}
	res.Version, res.Epoch, res.Watermarks = r.Manifest.Version, r.State.Epoch, r.State.Watermarks
	say("3/4 a worker published them into Lance in %.1fs: version %d, publisher epoch %d", res.PublishSeconds, res.Version, res.Epoch)

	if res.TableRows, err = verify(ctx, r, first, last); err != nil {
		return err
	}
	res.Verified = true
	say("4/4 read back %s rows: every ACKed id %d…%d is in the table exactly once", humanize.Comma(res.TableRows), first, last)
	res.NextSteps = []string{
		"walctl table read " + opts.Table + " --limit 5",
		"walctl epoch show " + opts.Table,
		"walctl wal stats --table " + opts.Table,
		"walctl worker run --tables " + opts.Table + "   # and in another terminal: walctl wal load --table " + opts.Table + " --rate 5 --duration 30s",
		"walctl doctor",
	}
	return f.Print(res, func() *render.Table {
		t := render.NewTable("try next")
		for _, s := range res.NextSteps {
			t.Add(s)
		}
		return t
	})
}

func walWhere(f *cmdutil.Factory) string {
	if a := f.Global().WAL; a != "" {
		return "server " + a
	}
	return "in " + f.WALDir()
}

// nextID returns one more than the largest id already in the table or in
// its unpublished WAL entries, so every run's ids are new.
func nextID(ctx context.Context, log wal.Log, lanceRoot, table string, shards int) (int64, error) {
	var top int64
	see := func(b arrow.RecordBatch) error {
		ids, ok := b.Column(0).(*array.Int64)
		if !ok {
			return fmt.Errorf("table %s: column id is not int64: %w", table, errs.ErrInvalid)
		}
		for i := 0; i < ids.Len(); i++ {
			top = max(top, ids.Value(i))
		}
		return nil
	}
	w := publish.Watermarks{}
	r, err := publish.OpenReader(lanceRoot, table, publish.Selection{})
	switch {
	case err == nil:
		w = r.State.Watermarks
		if err := r.Scan(ctx, []string{"id"}, see); err != nil {
			return 0, err
		}
	case !errors.Is(err, lance.ErrDatasetNotFound):
		return 0, err
	}
	for s := 0; s < shards; s++ {
		st, err := log.Stats(ctx, table, w)
		if err != nil {
			return 0, err
		}
		if st.Shards[s].LastPosition <= w[s] {
			continue
		}
		err = log.Read(ctx, table, s, max(w[s], st.Shards[s].TrimmedThrough)+1, 0, func(e wal.Entry) error { return see(e.Record) })
		if err != nil {
			return 0, err
		}
	}
	return top + 1, nil
}

func produce(ctx context.Context, f *cmdutil.Factory, log wal.Log, opts *Options, info wal.TableInfo, first int64) (last, bytes int64, err error) {
	gen, err := synth.New(info.Schema, uint64(first))
	if err != nil {
		return 0, 0, err
	}
	gen.NextID = first
	prog := f.Progress()
	total := int64(opts.Records)
	for done, i := int64(0), 0; done < total; i++ {
		n := min(int64(opts.BatchRows), total-done)
		b := gen.Batch(int(n))
		_, err := log.Append(ctx, opts.Table, i%info.Shards, b)
		bytes += publish.RecordBytes(b)
		b.Release()
		if err != nil {
			return 0, 0, err
		}
		done += n
		prog.Update(progress.Status{Label: "producing", Done: done, Total: total})
	}
	prog.Done("")
	for s := 0; s < info.Shards; s++ {
		if _, err := log.Seal(ctx, opts.Table, s); err != nil {
			return 0, 0, err
		}
	}
	return first + total - 1, bytes, nil
}

// publishAll runs a worker on the table until every sealed entry is
// published, then stops it (releasing its claim).
func publishAll(ctx context.Context, f *cmdutil.Factory, log wal.Log, table string) error {
	pub, err := f.Publisher(ctx, f.Owner(coord.OwnerWorker))
	if err != nil {
		return err
	}
	co, err := f.Coord(ctx)
	if err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w := worker.New(pub, co, worker.Config{Tables: []string{table}, PollInterval: 100 * time.Millisecond, Log: log, Logger: f.Logger})
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	prog := f.Progress()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return fmt.Errorf("worker stopped early: %w", err)
		case <-ctx.Done():
			stop()
			<-done
			return ctx.Err()
		case <-tick.C:
		}
		st, err := log.Stats(ctx, table, nil)
		if err != nil {
			return err
		}
		var pending, left int64
		for _, s := range st.Shards {
			left += int64(s.LastPosition - s.TrimmedThrough)
			pending += int64(s.LastPosition)
		}
		prog.Update(progress.Status{Label: "publishing", Done: pending - left, Total: pending, Extra: "WAL entries"})
		if left == 0 {
			stop()
			prog.Done("")
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		}
	}
}

// verify reads the table back and checks every id of [first, last] exactly
// once.
func verify(ctx context.Context, r *publish.Reader, first, last int64) (int64, error) {
	seen := make([]uint8, last-first+1)
	var rows int64
	err := r.Scan(ctx, []string{"id"}, func(b arrow.RecordBatch) error {
		ids := b.Column(0).(*array.Int64)
		rows += int64(ids.Len())
		for i := 0; i < ids.Len(); i++ {
			if id := ids.Value(i); id >= first && id <= last {
				seen[id-first]++
			}
		}
		return nil
	})
	if err != nil {
		return rows, err
	}
	for i, n := range seen {
		if n != 1 {
			return rows, fmt.Errorf("verification failed: id %d appears %d times in table %s: %w", first+int64(i), n, r.Manifest.Path, errs.ErrCorrupt)
		}
	}
	return rows, nil
}
