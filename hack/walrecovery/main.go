// Command walrecovery measures how long the WAL takes to recover at open
// (issue 30: the syncs added at open must not make a restart slow). It
// builds a WAL of unpublished generations once, then times wal.Open + Close
// of it as often as asked.
//
// It uses only the wal package's exported API (Open, Options and the
// Engine's CreateTable, Append, Generations, Table, Damage and Close), so the same source builds against the code
// before and after a change to the engine, and the two binaries can be run
// in turn on the same directory.
//
//	go build -o /tmp/walrecovery ./hack/walrecovery
//	/tmp/walrecovery -build /work/recovery-wal -size 10GiB -shards 4
//	/tmp/walrecovery -open /work/recovery-wal -runs 3 -quick -alternate -json
//
// -build creates the WAL (the directory must not exist or be empty): one
// table "recovery" (id int64, payload binary), rows of -row bytes of random
// payload in batches of -batch bytes, appended by -appenders goroutines
// spread over the shards until -size bytes of payload are appended. Nothing
// is trimmed, so every generation is unpublished, and the last generation of
// each shard is left open: Close syncs it but does not seal it.
//
// -open times Open and Close separately, -runs times. With -quick every
// round is repeated with Options{QuickOpen: true} (all full-check rounds
// first, then the QuickOpen rounds). The page cache is warm after -build and
// after every open; -evict asks the kernel to drop every file under the
// directory from the page cache first (posix_fadvise DONTNEED per file, no
// system setting: the files are clean after Close, so their pages go), and
// -alternate does each round twice, warm and then evicted. Eviction does not
// reach the hypervisor's cache, if any, nor the dentry and inode caches: the
// evicted figure is cold-ish, not a cold boot.
//
// Both modes disable age sealing (Options.MaxGenerationAge < 0) unless
// -age-seal is given: the build's generations are older than the default
// 10 s by the time it is opened, and the first open would otherwise seal the
// open generations, leaving later opens nothing open to check and adding the
// seal to what is timed.
//
// Each run prints a line; -json adds a JSON object per run, and one per
// variant with the median, minimum and maximum.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"

	"github.com/walctl/walctl/internal/core/wal"
)

const tableName = "recovery"

var (
	buildDir  = flag.String("build", "", "create a WAL of unpublished generations in this directory")
	size      = flag.String("size", "10GiB", "-build: payload bytes to append")
	shards    = flag.Int("shards", 4, "-build: shards of the table")
	appenders = flag.Int("appenders", 8, "-build: concurrent appenders, spread over the shards")
	rowSize   = flag.String("row", "64KiB", "-build: payload bytes per row")
	batchSize = flag.String("batch", "1MiB", "-build: payload bytes per appended batch")

	openDir   = flag.String("open", "", "time wal.Open + Close of this directory")
	runs      = flag.Int("runs", 3, "-open: rounds")
	quick     = flag.Bool("quick", false, "-open: also time the rounds with Options{QuickOpen: true}")
	evict     = flag.Bool("evict", false, "-open: drop the directory's files from the page cache before every open")
	alternate = flag.Bool("alternate", false, "-open: each round opens warm, then after eviction")

	ageSeal = flag.Bool("age-seal", false, "keep the engine's default age sealing (seals the open generations at the first open)")
	asJSON  = flag.Bool("json", false, "also print a JSON line per run and per variant")
	verbose = flag.Bool("v", false, "show the engine's log at info level (default: warnings and errors)")
)

func main() {
	log.SetFlags(0)
	flag.Parse()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	switch {
	case *buildDir != "" && *openDir == "":
		if err := build(*buildDir); err != nil {
			log.Fatalf("walrecovery: build: %v", err)
		}
	case *openDir != "" && *buildDir == "":
		if err := openRuns(*openDir); err != nil {
			log.Fatalf("walrecovery: open: %v", err)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: walrecovery -build DIR [-size 10GiB] [-shards 4] | -open DIR [-runs 3] [-quick] [-evict|-alternate] [-json]")
		flag.PrintDefaults()
		os.Exit(2)
	}
}

func options(quickOpen bool) wal.Options {
	o := wal.Options{QuickOpen: quickOpen}
	if !*ageSeal {
		o.MaxGenerationAge = -1
	}
	return o
}

func parseSize(name, s string) int64 {
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 {
		log.Fatalf("walrecovery: -%s %q: not a size", name, s)
	}
	return int64(n)
}

func build(dir string) error {
	total := parseSize("size", *size)
	row := parseSize("row", *rowSize)
	rowsPerBatch := max(1, int(parseSize("batch", *batchSize)/row))
	if *shards < 1 || *appenders < 1 {
		return fmt.Errorf("-shards and -appenders must be at least 1")
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s exists and is not empty", dir)
	}
	ctx := context.Background()
	start := time.Now()
	e, err := wal.Open(dir, options(false))
	if err != nil {
		return err
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "payload", Type: arrow.BinaryTypes.Binary},
	}, nil)
	if _, err := e.CreateTable(ctx, tableName, schema, *shards); err != nil {
		e.Close()
		return err
	}
	entries, err := appendAll(ctx, e, schema, total, row, rowsPerBatch)
	if err != nil {
		e.Close()
		return err
	}
	appendTime := time.Since(start)
	sealed, open, err := countGenerations(ctx, e)
	if err != nil {
		e.Close()
		return err
	}
	closeStart := time.Now()
	if err := e.Close(); err != nil {
		return err
	}
	closeTime := time.Since(closeStart)
	elapsed := time.Since(start)
	payload := entries * row * int64(rowsPerBatch)
	st, err := scan(dir)
	if err != nil {
		return err
	}
	fmt.Printf("built %s: %d entries of %d rows × %s, %s of payload (%d bytes) in %s (%.0f MiB/s; close %s); on disk %s (%d bytes) in %d generations (%d sealed, %d open) over %d shards\n",
		dir, entries, rowsPerBatch, humanize.IBytes(uint64(row)), humanize.IBytes(uint64(payload)), payload,
		elapsed.Round(time.Millisecond), float64(payload)/(1<<20)/appendTime.Seconds(), closeTime.Round(time.Millisecond),
		humanize.IBytes(uint64(st.bytes)), st.bytes, st.gens, sealed, open, *shards)
	if *asJSON {
		printJSON(map[string]any{"mode": "build", "dir": dir, "entries": entries, "payload_bytes": payload,
			"disk_bytes": st.bytes, "generations": st.gens, "sealed": sealed, "open": open, "shards": *shards,
			"appenders": *appenders, "seconds": elapsed.Seconds(), "close_seconds": closeTime.Seconds()})
	}
	return nil
}

// appendAll appends batches of rowsPerBatch rows of row bytes from
// -appenders goroutines, round-robin over the shards, until total bytes
// are appended; it returns the number of entries.
func appendAll(ctx context.Context, e *wal.Engine, schema *arrow.Schema, total, row int64, rowsPerBatch int) (int64, error) {
	var appended, entries, nextID atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, *appenders)
	for a := range *appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One random payload per appender; each row's first 8 bytes
			// carry its id so that no two rows are alike.
			payload := make([]byte, row)
			rand.Read(payload)
			b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			defer b.Release()
			ids := b.Field(0).(*array.Int64Builder)
			pl := b.Field(1).(*array.BinaryBuilder)
			for appended.Add(row*int64(rowsPerBatch)) <= total {
				for range rowsPerBatch {
					id := nextID.Add(1)
					binary.LittleEndian.PutUint64(payload, uint64(id))
					ids.Append(id)
					pl.Append(payload)
				}
				rec := b.NewRecordBatch()
				_, err := e.Append(ctx, tableName, a%*shards, rec)
				rec.Release()
				if err != nil {
					errc <- err
					return
				}
				entries.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errc)
	return entries.Load(), <-errc
}

// countGenerations counts the table's sealed and open generations.
func countGenerations(ctx context.Context, e *wal.Engine) (sealed, open int, err error) {
	for s := range *shards {
		gens, err := e.Generations(ctx, tableName, s)
		if err != nil {
			return 0, 0, err
		}
		for _, g := range gens {
			if g.Sealed {
				sealed++
			} else {
				open++
			}
		}
	}
	return sealed, open, nil
}

// dirStats are the WAL directory's generation files.
type dirStats struct {
	bytes int64 // all regular files
	gens  int   // gen-*.arrows files
	files int
}

func scan(dir string) (dirStats, error) {
	var st dirStats
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st.files++
		st.bytes += info.Size()
		if strings.HasPrefix(d.Name(), "gen-") && strings.HasSuffix(d.Name(), ".arrows") {
			st.gens++
		}
		return nil
	})
	return st, err
}

// dropCache advises the kernel that no file under dir is needed in the
// page cache; clean pages are dropped at once.
func dropCache(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("fadvise %s: %w", path, err)
		}
		return nil
	})
}

// run is one timed open.
type run struct {
	Mode        string  `json:"mode"`
	Variant     string  `json:"variant"` // full or quick
	Cache       string  `json:"cache"`   // warm or evicted
	Round       int     `json:"round"`
	OpenSeconds float64 `json:"open_seconds"`
	// CloseSeconds is Close after the open (no appends in between).
	CloseSeconds float64 `json:"close_seconds"`
	EvictSeconds float64 `json:"evict_seconds,omitempty"`
	DiskBytes    int64   `json:"disk_bytes"`
	Generations  int     `json:"generations"`
	// OpenGenerations is how many generations the engine reports unsealed
	// after the open (one per shard is the point of the build).
	OpenGenerations int `json:"open_generations"`
	Damaged         int `json:"damaged"`
}

func openRuns(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "tables", tableName)); err != nil {
		return fmt.Errorf("%s holds no table %q made by -build: %w", dir, tableName, err)
	}
	st, err := scan(dir)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s (%d bytes) in %d files, %d generations\n", dir, humanize.IBytes(uint64(st.bytes)), st.bytes, st.files, st.gens)
	variants := []string{"full"}
	if *quick {
		variants = append(variants, "quick")
	}
	caches := []string{"warm"}
	switch {
	case *alternate:
		caches = []string{"warm", "evicted"}
	case *evict:
		caches = []string{"evicted"}
	}
	times := map[string][]float64{}
	var order []string
	for _, v := range variants {
		for r := 1; r <= *runs; r++ {
			for _, c := range caches {
				res, err := openOnce(dir, v, c, r, st)
				if err != nil {
					return err
				}
				fmt.Printf("%-5s %-7s round %d: open %s, close %s", v, c, r,
					time.Duration(res.OpenSeconds*float64(time.Second)).Round(time.Millisecond),
					time.Duration(res.CloseSeconds*float64(time.Second)).Round(time.Millisecond))
				if c == "evicted" {
					fmt.Printf(" (eviction %s)", time.Duration(res.EvictSeconds*float64(time.Second)).Round(time.Millisecond))
				}
				fmt.Printf("; %d open generations, %d damaged\n", res.OpenGenerations, res.Damaged)
				if *asJSON {
					printJSON(res)
				}
				k := v + " " + c
				if _, ok := times[k]; !ok {
					order = append(order, k)
				}
				times[k] = append(times[k], res.OpenSeconds)
			}
		}
	}
	for _, k := range order {
		t := slices.Clone(times[k])
		slices.Sort(t)
		med := t[len(t)/2]
		if len(t)%2 == 0 {
			med = (t[len(t)/2-1] + t[len(t)/2]) / 2
		}
		fmt.Printf("%-13s open: median %.3f s [%.3f–%.3f] of %d; %.0f MiB/s of WAL at the median\n",
			k, med, t[0], t[len(t)-1], len(t), float64(st.bytes)/(1<<20)/med)
		if *asJSON {
			v, c, _ := strings.Cut(k, " ")
			printJSON(map[string]any{"mode": "summary", "variant": v, "cache": c, "runs": len(t),
				"median_seconds": med, "min_seconds": t[0], "max_seconds": t[len(t)-1],
				"disk_bytes": st.bytes, "generations": st.gens})
		}
	}
	return nil
}

func openOnce(dir, variant, cache string, round int, st dirStats) (run, error) {
	res := run{Mode: "open", Variant: variant, Cache: cache, Round: round, DiskBytes: st.bytes, Generations: st.gens}
	if cache == "evicted" {
		t := time.Now()
		if err := dropCache(dir); err != nil {
			return res, err
		}
		res.EvictSeconds = time.Since(t).Seconds()
	}
	t := time.Now()
	e, err := wal.Open(dir, options(variant == "quick"))
	if err != nil {
		return res, err
	}
	res.OpenSeconds = time.Since(t).Seconds()
	// Untimed: what the engine recovered.
	res.Damaged = len(e.Damage())
	info, err := e.Table(context.Background(), tableName)
	if err == nil {
		for s := range info.Shards {
			gens, err := e.Generations(context.Background(), tableName, s)
			if err != nil {
				break
			}
			for _, g := range gens {
				if !g.Sealed {
					res.OpenGenerations++
				}
			}
		}
	}
	t = time.Now()
	if err := e.Close(); err != nil {
		return res, err
	}
	res.CloseSeconds = time.Since(t).Seconds()
	return res, nil
}

func printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
}
