// Package oracle runs the official LanceDB implementation (the Node package
// pinned in tools/lance-oracle) as a reference for walctl's Lance code: it
// reads, filters, time-travels, appends to, optimizes and creates tables and
// reports what it saw as JSON. It does not import testing: `walctl bench
// lance` links it; tests find it through package oracletest.
package oracle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/walctl/walctl/internal/core/errs"
)

// Oracle runs tools/lance-oracle/oracle.js with node.
type Oracle struct {
	// Dir is the absolute path of tools/lance-oracle.
	Dir string
	// Storage are LanceDB storage options for tables on an object store
	// (see S3Options). They reach node through its environment, never its
	// command line, so a secret key does not show in a process listing.
	Storage map[string]string
}

// EnvStorageOptions is the environment variable that carries Storage to
// oracle.js as a JSON object.
const EnvStorageOptions = "LANCE_ORACLE_STORAGE_OPTIONS"

// WithStorage returns a copy of o that opens tables with storage options
// opts (nil: none).
func (o *Oracle) WithStorage(opts map[string]string) *Oracle {
	c := *o
	c.Storage = opts
	return &c
}

// S3Options are LanceDB's storage options for an S3-compatible endpoint
// with static keys; an http:// endpoint also gets allow_http.
func S3Options(endpoint, region, accessKey, secretKey string) map[string]string {
	m := map[string]string{
		"aws_endpoint":          endpoint,
		"aws_region":            region,
		"aws_access_key_id":     accessKey,
		"aws_secret_access_key": secretKey,
	}
	if strings.HasPrefix(endpoint, "http://") {
		m["allow_http"] = "true"
	}
	return m
}

// Find locates tools/lance-oracle from the module root above the working
// directory and checks that its dependencies are installed.
func Find() (*Oracle, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return At(filepath.Join(dir, "tools", "lance-oracle"))
		}
		if filepath.Dir(dir) == dir {
			return nil, fmt.Errorf("no go.mod above %s: %w", wd, errs.ErrNotFound)
		}
	}
}

// At returns the oracle installed in dir (a copy of tools/lance-oracle with
// its dependencies installed), after checking that it is there and that
// node is on PATH; either missing is errs.ErrUnavailable.
func At(dir string) (*Oracle, error) {
	if _, err := os.Stat(filepath.Join(dir, "oracle.js")); err != nil {
		return nil, fmt.Errorf("no LanceDB oracle in %s (oracle.js missing): %w", dir, errs.ErrUnavailable)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@lancedb", "lancedb", "package.json")); err != nil {
		return nil, fmt.Errorf("the LanceDB oracle is not installed in %s: run `npm ci --prefix tools/lance-oracle` (or `make oracle`) from the module root: %w", dir, errs.ErrUnavailable)
	}
	if _, err := exec.LookPath("node"); err != nil {
		return nil, fmt.Errorf("node is not on PATH; the LanceDB oracle needs Node.js 18 or later: %w", errs.ErrUnavailable)
	}
	return &Oracle{Dir: dir}, nil
}

// Run runs one oracle command and decodes its JSON output into out.
func (o *Oracle) Run(ctx context.Context, out any, args ...string) error {
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(o.Dir, "oracle.js")}, args...)...)
	cmd.Dir = o.Dir
	if len(o.Storage) > 0 {
		b, err := json.Marshal(o.Storage)
		if err != nil {
			return err
		}
		cmd.Env = append(os.Environ(), EnvStorageOptions+"="+string(b))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("oracle %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("oracle %s: bad output %q: %v", strings.Join(args, " "), stdout.String(), err)
	}
	return nil
}

// split turns a dataset path <dir>/<name>.lance, or a URI
// s3://bucket/prefix/<name>.lance, into LanceDB's (dir, name).
func split(root string) (string, string, error) {
	if i := strings.Index(root, "://"); i > 0 {
		j := strings.LastIndex(root, "/")
		name, ok := strings.CutSuffix(root[j+1:], ".lance")
		if j < i+3 || !ok || name == "" {
			return "", "", fmt.Errorf("%s is not <uri>/<name>.lance: %w", root, errs.ErrInvalid)
		}
		return root[:j], name, nil
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", "", err
	}
	name, ok := strings.CutSuffix(filepath.Base(abs), ".lance")
	if !ok {
		return "", "", fmt.Errorf("%s does not end in .lance: %w", root, errs.ErrInvalid)
	}
	return filepath.Dir(abs), name, nil
}

// Field is one column of a dump's schema as Arrow JS prints it.
type Field struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// Dump is what the official reader returned for a query.
type Dump struct {
	Version   uint64                       `json:"version"`
	NumRows   int                          `json:"num_rows"`
	CountRows int                          `json:"count_rows"`
	Schema    []Field                      `json:"schema"`
	Columns   map[string][]json.RawMessage `json:"columns"`
}

// Int64s decodes the int64 column col of the dump.
func (d *Dump) Int64s(col string) ([]int64, error) {
	vals := make([]int64, len(d.Columns[col]))
	for i, raw := range d.Columns[col] {
		v, err := ParseInt64(raw)
		if err != nil {
			return nil, fmt.Errorf("column %s, row %d: %w", col, i, err)
		}
		vals[i] = v
	}
	return vals, nil
}

// ParseInt64 decodes an int64 as the official reader prints it: a JSON
// string, since JavaScript numbers stop being exact past 2^53.
func ParseInt64(raw json.RawMessage) (int64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("int64 %s: %v", raw, err)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("int64 %q: %v", s, err)
	}
	return v, nil
}

// DumpOptions select the version, filter and columns of a dump.
type DumpOptions struct {
	Version uint64
	Filter  string
	Columns []string
}

// Dump reads the table at root with the official reader.
func (o *Oracle) Dump(ctx context.Context, root string, opts DumpOptions) (*Dump, error) {
	dir, name, err := split(root)
	if err != nil {
		return nil, err
	}
	args := []string{"dump", dir, name}
	if opts.Version != 0 {
		args = append(args, "--version", strconv.FormatUint(opts.Version, 10))
	}
	if opts.Filter != "" {
		args = append(args, "--filter", opts.Filter)
	}
	if len(opts.Columns) > 0 {
		args = append(args, "--columns", strings.Join(opts.Columns, ","))
	}
	var d Dump
	return &d, o.Run(ctx, &d, args...)
}

// Result is the outcome of a writing command.
type Result struct {
	Version          uint64 `json:"version"`
	CountRows        int    `json:"count_rows"`
	FragmentsRemoved int    `json:"fragments_removed"`
	FragmentsAdded   int    `json:"fragments_added"`
}

func (o *Oracle) withRows(ctx context.Context, cmd, root string, rows any, extra ...string) (*Result, error) {
	return o.withFile(ctx, cmd, root, "oracle-rows-*.json", func(f *os.File) error {
		return json.NewEncoder(f).Encode(rows)
	}, extra...)
}

// withFile runs an oracle command on root whose argument is a temporary
// file that write fills.
func (o *Oracle) withFile(ctx context.Context, cmd, root, pattern string, write func(*os.File) error, extra ...string) (*Result, error) {
	dir, name, err := split(root)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	var r Result
	return &r, o.Run(ctx, &r, append([]string{cmd, dir, name, f.Name()}, extra...)...)
}

// Append adds rows (plain JSON objects) with the official writer's table.add.
func (o *Oracle) Append(ctx context.Context, root string, rows any) (*Result, error) {
	return o.withRows(ctx, "append", root, rows)
}

// Create makes a table with the official writer from a spec: {"schema":
// [{"name","type","nullable"}], "rows": [...]}; types are int64, utf8,
// float64, float32, fsl_f32:<dim>. storageVersion "" keeps LanceDB's
// default (2.1).
func (o *Oracle) Create(ctx context.Context, root string, spec any, storageVersion string) (*Result, error) {
	var extra []string
	if storageVersion != "" {
		extra = []string{"--storage-version", storageVersion}
	}
	return o.withRows(ctx, "create", root, spec, extra...)
}

// CreateRecords makes a table with the official writer from Arrow record
// batches, schema and types kept exactly (every type walctl supports); they
// reach node as an IPC stream. storageVersion as for Create.
func (o *Oracle) CreateRecords(ctx context.Context, root string, recs []arrow.Record, storageVersion string) (*Result, error) {
	var extra []string
	if storageVersion != "" {
		extra = []string{"--storage-version", storageVersion}
	}
	return o.withIPC(ctx, "create", root, recs, extra...)
}

// AppendRecords adds Arrow record batches with the official writer's
// table.add.
func (o *Oracle) AppendRecords(ctx context.Context, root string, recs []arrow.Record) (*Result, error) {
	return o.withIPC(ctx, "append", root, recs)
}

func (o *Oracle) withIPC(ctx context.Context, cmd, root string, recs []arrow.Record, extra ...string) (*Result, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("no record batches: %w", errs.ErrInvalid)
	}
	return o.withFile(ctx, cmd, root, "oracle-batches-*.arrow", func(f *os.File) error {
		w := ipc.NewWriter(f, ipc.WithSchema(recs[0].Schema()))
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				w.Close()
				return err
			}
		}
		return w.Close()
	}, extra...)
}

// Optimize runs the official table.optimize() (compaction and cleanup).
func (o *Oracle) Optimize(ctx context.Context, root string) (*Result, error) {
	dir, name, err := split(root)
	if err != nil {
		return nil, err
	}
	var r Result
	return &r, o.Run(ctx, &r, "optimize", dir, name)
}

// Delete removes the rows matching the SQL predicate with the official
// writer's table.delete (it records them in a deletion file).
func (o *Oracle) Delete(ctx context.Context, root, predicate string) (*Result, error) {
	dir, name, err := split(root)
	if err != nil {
		return nil, err
	}
	var r Result
	return &r, o.Run(ctx, &r, "delete", dir, name, predicate)
}
