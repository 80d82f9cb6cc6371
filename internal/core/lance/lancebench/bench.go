// Package lancebench compares the write throughput of walctl's Lance writer,
// in file format 2.0 and 2.1, with the official LanceDB writer (table.add
// through the Node oracle, its default format 2.1 with compression) on the
// same Arrow batches, on the same disk, in one run.
package lancebench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/wal/walbench"
)

// Dim and PayloadBytes fix the benchmark's vector and binary sizes; the
// oracle's bench.js generates the same values.
const (
	Dim          = 768
	PayloadBytes = 256
)

// Config sizes a run: Adds files (walctl) or table.add calls (official),
// each of BatchesPerAdd batches of RowsPerBatch rows. DDMiB sizes the dd
// conv=fdatasync runs right before and right after the walctl writers (0:
// no dd, no ratio).
type Config struct {
	Adds          int `json:"adds"`
	BatchesPerAdd int `json:"batches_per_add"`
	RowsPerBatch  int `json:"rows_per_batch"`
	DDMiB         int `json:"dd_mib"`
}

// DefaultConfig writes about 440 MiB per side: 8 adds of 16 × 1,024 rows,
// bracketed by 256 MiB dd runs.
var DefaultConfig = Config{Adds: 8, BatchesPerAdd: 16, RowsPerBatch: 1024, DDMiB: 256}

// Side is one writer's figures. MiBPerSec counts logical Arrow bytes;
// DiskMiBPerSec the data-file bytes it wrote (and synced), the disk's own
// work, and RatioToDD is DiskMiBPerSec over Result.DDMiBps (walctl sides
// only).
type Side struct {
	Seconds       float64 `json:"seconds"`
	MiBPerSec     float64 `json:"mib_per_sec"`
	DataBytes     int64   `json:"data_bytes"`
	Rows          int     `json:"rows"`
	DiskMiBPerSec float64 `json:"disk_mib_per_sec"`
	RatioToDD     float64 `json:"ratio_to_dd,omitempty"`
}

// Result is a run's outcome; throughput is logical Arrow bytes per second.
// Walctl is the 2.0 writer (walctl's default), Walctl21 the 2.1 writer.
type Result struct {
	Config          Config  `json:"config"`
	LogicalBytes    int64   `json:"logical_bytes"`
	Walctl          Side    `json:"walctl"`
	Walctl21        Side    `json:"walctl_2_1"`
	Official        Side    `json:"official"`
	SpeedRatio      float64 `json:"speed_ratio"`         // walctl 2.0 MiB/s ÷ official MiB/s
	SpeedRatio21    float64 `json:"speed_ratio_2_1"`     // walctl 2.1 MiB/s ÷ official MiB/s
	FileSizeRatio   float64 `json:"file_size_ratio"`     // walctl 2.0 bytes ÷ official bytes
	FileSizeRatio21 float64 `json:"file_size_ratio_2_1"` // walctl 2.1 bytes ÷ official bytes
	WorkspaceMax    int     `json:"walctl_workspace_bytes"`
	// DD are the dd runs right before and right after the walctl writers;
	// DDMiBps is the higher of the two (walbench.Around): a ratio to the
	// best the disk showed around the measurement.
	DD      []walbench.DDResult `json:"dd_runs,omitempty"`
	DDMiBps float64             `json:"dd_mib_per_s,omitempty"`
}

// walctlSide is one walctl table being written in one file format.
type walctlSide struct {
	ds      *lance.Dataset
	schema  *lance.Schema
	version lance.FileVersion
	elapsed time.Duration
	out     *Side
}

func newWalctlSide(path string, fv lance.FileVersion, out *Side) (*walctlSide, error) {
	ds, err := lance.Create(path, Schema(), lance.CreateOptions{FileVersion: fv})
	if err != nil {
		return nil, err
	}
	m, err := ds.Latest()
	if err != nil {
		return nil, err
	}
	schema, err := m.Schema()
	if err != nil {
		return nil, err
	}
	return &walctlSide{ds: ds, schema: schema, version: fv, out: out}, nil
}

// Schema is the benchmark's table schema.
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "vec", Type: arrow.FixedSizeListOfField(Dim, arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: true})},
		{Name: "payload", Type: arrow.BinaryTypes.Binary},
	}, nil)
}

// Batch generates rows [first, first+n) exactly as bench.js does.
func Batch(mem memory.Allocator, first, n int) arrow.Record {
	b := array.NewRecordBuilder(mem, Schema())
	defer b.Release()
	ids, ts := b.Field(0).(*array.Int64Builder), b.Field(1).(*array.TimestampBuilder)
	names, vecs, pays := b.Field(2).(*array.StringBuilder), b.Field(3).(*array.FixedSizeListBuilder), b.Field(4).(*array.BinaryBuilder)
	items := vecs.ValueBuilder().(*array.Float32Builder)
	items.Reserve(n * Dim)
	pay := make([]byte, PayloadBytes)
	for i := range n {
		g := first + i
		ids.Append(int64(g))
		ts.Append(arrow.Timestamp(1_700_000_000_000_000 + int64(g)))
		names.Append("row-" + strconv.Itoa(g))
		vecs.Append(true)
		for j := range Dim {
			items.UnsafeAppend(float32(float64((g*Dim+j)%1000) / 1000))
		}
		for j := range pay {
			pay[j] = byte((g*31 + j*7) & 255)
		}
		pays.Append(pay)
	}
	return b.NewRecord()
}

func logicalBytes(r arrow.Record) int64 {
	var n int64
	for _, c := range r.Columns() {
		for _, d := range append([]arrow.ArrayData{c.Data()}, c.Data().Children()...) {
			for _, buf := range d.Buffers() {
				if buf != nil {
					n += int64(buf.Len())
				}
			}
		}
	}
	return n
}

// Run writes the same batches through walctl in file format 2.0 and 2.1
// (CreateFile + Commit per add, one table per format) and through the
// official table.add under dir, and reports all three. Batch generation is
// not timed on any side.
func Run(ctx context.Context, o *oracle.Oracle, dir string, cfg Config) (*Result, error) {
	if cfg.Adds <= 0 || cfg.BatchesPerAdd <= 0 || cfg.RowsPerBatch <= 0 {
		return nil, fmt.Errorf("bench config %+v: %w", cfg, errs.ErrInvalid)
	}
	res := &Result{Config: cfg}
	if err := res.measureDD(ctx, dir); err != nil {
		return nil, err
	}
	sides := make([]*walctlSide, 0, 2)
	for _, v := range []struct {
		name string
		fv   lance.FileVersion
		out  *Side
	}{{"walctl.lance", lance.FileVersion2_0, &res.Walctl}, {"walctl21.lance", lance.FileVersion2_1, &res.Walctl21}} {
		side, err := newWalctlSide(filepath.Join(dir, v.name), v.fv, v.out)
		if err != nil {
			return nil, err
		}
		sides = append(sides, side)
	}
	for a := range cfg.Adds {
		recs := make([]arrow.Record, cfg.BatchesPerAdd)
		for b := range recs {
			recs[b] = Batch(memory.DefaultAllocator, (a*cfg.BatchesPerAdd+b)*cfg.RowsPerBatch, cfg.RowsPerBatch)
			res.LogicalBytes += logicalBytes(recs[b])
		}
		var err error
		for i := range sides {
			side := sides[(a+i)%len(sides)] // alternate who writes first
			start := time.Now()
			if err = writeAndCommit(ctx, side, recs, res); err != nil {
				break
			}
			side.elapsed += time.Since(start)
		}
		for _, r := range recs {
			r.Release()
		}
		if err != nil {
			return nil, err
		}
	}
	if err := res.measureDD(ctx, dir); err != nil {
		return nil, err
	}
	if len(res.DD) == 2 {
		res.DDMiBps = walbench.Around(res.DD, 0)
	}
	for _, side := range sides {
		side.out.Seconds = side.elapsed.Seconds()
		side.out.Rows = cfg.Adds * cfg.BatchesPerAdd * cfg.RowsPerBatch
		var err error
		if side.out.DataBytes, err = dirBytes(filepath.Join(side.ds.Root(), "data")); err != nil {
			return nil, err
		}
	}
	var off struct {
		Seconds   float64 `json:"seconds"`
		Rows      int     `json:"rows"`
		DataBytes int64   `json:"data_bytes"`
	}
	err := o.Run(ctx, &off, "bench", dir, "official",
		strconv.Itoa(cfg.Adds), strconv.Itoa(cfg.BatchesPerAdd), strconv.Itoa(cfg.RowsPerBatch))
	if err != nil {
		return nil, err
	}
	res.Official = Side{Seconds: off.Seconds, Rows: off.Rows, DataBytes: off.DataBytes}
	mib := float64(res.LogicalBytes) / (1 << 20)
	res.rates(mib)
	res.SpeedRatio = res.Walctl.MiBPerSec / res.Official.MiBPerSec
	res.SpeedRatio21 = res.Walctl21.MiBPerSec / res.Official.MiBPerSec
	res.FileSizeRatio = float64(res.Walctl.DataBytes) / float64(res.Official.DataBytes)
	res.FileSizeRatio21 = float64(res.Walctl21.DataBytes) / float64(res.Official.DataBytes)
	return res, nil
}

// measureDD appends one dd run to res.DD (nothing when DDMiB is 0).
func (res *Result) measureDD(ctx context.Context, dir string) error {
	if res.Config.DDMiB <= 0 {
		return nil
	}
	dd, err := walbench.DD(ctx, dir, res.Config.DDMiB)
	if err != nil {
		return err
	}
	res.DD = append(res.DD, dd)
	return nil
}

// rates fills each side's MiB/s of mib logical MiB and of its data bytes,
// and the walctl sides' ratios to dd.
func (res *Result) rates(mib float64) {
	for _, s := range []*Side{&res.Walctl, &res.Walctl21, &res.Official} {
		s.MiBPerSec = mib / s.Seconds
		s.DiskMiBPerSec = float64(s.DataBytes) / (1 << 20) / s.Seconds
	}
	if res.DDMiBps > 0 {
		res.Walctl.RatioToDD = res.Walctl.DiskMiBPerSec / res.DDMiBps
		res.Walctl21.RatioToDD = res.Walctl21.DiskMiBPerSec / res.DDMiBps
	}
}

func writeAndCommit(ctx context.Context, side *walctlSide, recs []arrow.Record, res *Result) error {
	ds := side.ds
	w, err := ds.CreateFile(side.schema, lance.FileOptions{Version: side.version})
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			w.Abort()
			return err
		}
	}
	res.WorkspaceMax = max(res.WorkspaceMax, w.WorkspaceBytes())
	desc, err := w.Close()
	if err != nil {
		return err
	}
	_, err = ds.CommitLatest(ctx, lance.CommitRequest{Kind: lance.Append, Files: []lance.Descriptor{desc}}, 3)
	return err
}

func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return err
	})
	return n, err
}
