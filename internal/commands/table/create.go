package table

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/schemaspec"
)

// CreateOptions of `walctl table create`.
type CreateOptions struct {
	deps
	ReadInput  func(path string) ([]byte, error)
	Name       string
	SchemaFile string
	Shards     int
}

// NewCmdCreate returns `table create`.
func NewCmdCreate(f *cmdutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{deps: newDeps(f), ReadInput: f.ReadInput}
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
only in case from an existing table's.`,
		Example: `  cat > orders.json <<'JSON'
  [{"name": "id", "type": "int64"},
   {"name": "ts", "type": "timestamp[us, UTC]"},
   {"name": "body", "type": "utf8", "nullable": true}]
  JSON
  walctl table create --table orders --schema orders.json --shards 4`,
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
