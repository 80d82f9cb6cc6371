package quickstart

import (
	"context"
	"fmt"
	"strings"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/producer"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/schemaspec"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/verify"
	"github.com/walctl/walctl/internal/core/wal"
)

const schemaJSON = `[{"name": "id", "type": "int64"},
 {"name": "ts", "type": "timestamp[us, UTC]"},
 {"name": "body", "type": "utf8", "nullable": true},
 {"name": "embedding", "type": "fixed_size_list<float32>[32]"}]`

func register(ctx context.Context, opts *Options) (wal.Log, wal.TableInfo, error) {
	log, err := opts.WAL(ctx)
	if err != nil {
		return nil, wal.TableInfo{}, err
	}
	schema, err := schemaspec.Parse([]byte(schemaJSON))
	if err != nil {
		return nil, wal.TableInfo{}, err
	}
	info, err := log.CreateTable(ctx, opts.Table, schema, opts.Shards)
	if err != nil {
		return nil, wal.TableInfo{}, fmt.Errorf("register the demo table: %w", err)
	}
	return log, info, nil
}

func produce(ctx context.Context, opts *Options, log wal.Log, info wal.TableInfo, res *Result) error {
	first, err := producer.NextID(ctx, log, cmdutil.RootStore(opts.Store, opts.LanceRoot), info)
	if err != nil {
		return err
	}
	prog := opts.Progress()
	start := opts.Now()
	total := int64(opts.Records)
	bytes, err := producer.Produce(ctx, log, info, first, total, opts.BatchRows, func(done int64) {
		prog.Update(progress.Status{Label: "producing", Done: done, Total: total})
	})
	prog.Done("")
	if err != nil {
		return err
	}
	res.FirstID, res.LastID, res.Records, res.WALBytes = first, first+total-1, total, bytes
	res.ProduceSeconds = opts.Now().Sub(start).Seconds()
	return nil
}

// publishAll publishes every sealed entry, round after round, under one
// claim, as a worker does; no polling.
func publishAll(ctx context.Context, opts *Options, res *Result) error {
	pub, err := opts.Publisher(ctx, opts.Owner(coord.OwnerWorker))
	if err != nil {
		return err
	}
	prog := opts.Progress()
	start := opts.Now()
	var done int64
	epoch, _, err := pub.All(ctx, opts.Table, func(r *publish.Result) {
		done += int64(r.Rows)
		res.Version = max(res.Version, r.Version)
		prog.Update(progress.Status{Label: "publishing", Done: done, Total: res.Records, Extra: "records"})
	})
	prog.Done("")
	if err != nil {
		return err
	}
	res.Epoch = epoch
	res.PublishSeconds = opts.Now().Sub(start).Seconds()
	return nil
}

// verifyIDs reads the table back and checks every ACKed id exactly once.
func verifyIDs(ctx context.Context, opts *Options, res *Result) error {
	r, err := publish.OpenReaderOn(cmdutil.RootStore(opts.Store, opts.LanceRoot), opts.Table, publish.Selection{})
	if err != nil {
		return err
	}
	res.Version, res.Watermarks = r.Manifest.Version, r.State.Watermarks
	if res.TableRows, err = verify.IDs(ctx, r, synth.IDField, res.FirstID, res.LastID); err != nil {
		return fmt.Errorf("verification failed: %w", err)
	}
	res.Verified = true
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
