package table

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/schemaspec"
	"github.com/walctl/walctl/internal/core/walflight"
)

// CreateOptions of `walctl table create`.
type CreateOptions struct {
	deps
	ReadInput func(path string) ([]byte, error)
	// Groups are the configured replicated WAL groups; Place records a
	// table's group in etcd (create-if-absent).
	Groups     func() (walflight.Groups, error)
	Place      func(ctx context.Context, table, group string) error
	Name       string
	SchemaFile string
	Shards     int
	Group      string
}

// NewCmdCreate returns `table create`.
func NewCmdCreate(f *cmdutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{deps: newDeps(f), ReadInput: f.ReadInput, Groups: f.WALGroups,
		Place: func(ctx context.Context, table, group string) error {
			p, err := f.Placement(ctx)
			if err != nil {
				return err
			}
			return p.Record(ctx, table, group)
		}}
	cmd := &cobra.Command{
		Use:   "create --table T --schema FILE [--shards N]",
		Short: "Register a table with a fixed Arrow schema and shard count",
		Long: `Register a table in the WAL with a fixed Arrow schema and a number of shards.
The schema is a JSON list of fields or an Arrow IPC stream/file whose schema is
taken. Registering the same table again with the identical schema and shard
count succeeds and changes nothing; a different schema is refused (exit 4).

Field types: bool, int8…int64, uint8…uint64, float16/32/64, utf8, large_utf8,
binary, large_binary, fixed_size_binary[N], fixed_size_list<float32>[N] (also
float16, int8, uint8 items; N up to 65536 for both), date32,
timestamp[s|ms|us|ns] or with a zone: timestamp[us, UTC], an IANA name
(Europe/Paris) or a UTC offset without a colon (+0530).

Field names: no control characters; two names may not differ only in case.
Table names: 1–128 characters of letters, digits, '_' and '-', not differing
only in case from an existing table's.

With replicated WAL groups configured (--wal-groups), --group G places the
table in group G (needed unless only one group is configured). The placement
is recorded in etcd once and never changes: creating the table again with
another group fails naming both (exit 4); an unknown group is exit 2; a
group with no reachable quorum is exit 5 naming the members tried.

EXIT STATUS
  0 registered (or already registered identically), 2 invalid schema, name
  or group, 4 a different schema or group, 5 etcd or the WAL unavailable.`,
		Example: `  cat > orders.json <<'JSON'
  [{"name": "id", "type": "int64"},
   {"name": "ts", "type": "timestamp[us, UTC]"},
   {"name": "body", "type": "utf8", "nullable": true}]
  JSON
  walctl table create --table orders --schema orders.json --shards 4
  walctl --wal-groups 'g1=10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070' table create --table orders --schema orders.json --group g1`,
		Args: cmdutil.TableArgs("table create", &opts.Name, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.SchemaFile == "" {
				return cmdutil.FlagErrorf("--schema is required")
			}
			if opts.Shards < 1 {
				return cmdutil.FlagErrorf("--shards must be at least 1, not %d", opts.Shards)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return createRun(cmd.Context(), opts)
		},
	}
	cmdutil.TableFlag(cmd, &opts.Name, "table name")
	cmd.Flags().StringVar(&opts.SchemaFile, "schema", "", "schema file: JSON field list or Arrow IPC (- for stdin)")
	cmd.Flags().IntVar(&opts.Shards, "shards", 1, "number of shards")
	cmd.Flags().StringVar(&opts.Group, "group", "", "replicated WAL group to place the table in (see --wal-groups)")
	return cmd
}

func createRun(ctx context.Context, opts *CreateOptions) error {
	data, err := opts.ReadInput(opts.SchemaFile)
	if err != nil {
		return err
	}
	schema, err := schemaspec.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", opts.SchemaFile, err)
	}
	if err := placeTable(ctx, opts); err != nil {
		return err
	}
	log, err := opts.WAL(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := opts.CallContext(ctx)
	defer cancel()
	info, err := log.CreateTable(cctx, opts.Name, schema, opts.Shards)
	if err != nil {
		return err
	}
	return printInfo(opts.deps, info)
}

// placeTable records the table's WAL group before it is registered there,
// so that the group is fixed before any entry exists.
func placeTable(ctx context.Context, opts *CreateOptions) error {
	groups, err := opts.Groups()
	if err != nil {
		return err
	}
	if len(groups) == 0 {
		if opts.Group != "" {
			return fmt.Errorf("--group %s: no replicated WAL groups are configured (--wal-groups): %w", opts.Group, walflight.ErrUnknownGroup)
		}
		return nil
	}
	if opts.Group == "" {
		if len(groups) > 1 {
			return cmdutil.FlagErrorf("--group is required with several WAL groups (configured: %s)", strings.Join(groups.Names(), ", "))
		}
		opts.Group = groups.Names()[0]
	}
	if _, err := groups.Members(opts.Group); err != nil {
		return err
	}
	return opts.Place(ctx, opts.Name, opts.Group)
}
