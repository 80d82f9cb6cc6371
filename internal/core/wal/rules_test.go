package wal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/walctl/walctl/internal/core/dirlock"
	"github.com/walctl/walctl/internal/core/errs"
)

func TestSchemaMismatchWritesNothing(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	mustAppend(t, e, "t", 0, 1, 1)
	data := genFiles(t, dir, "t", 0, ".arrows")[0]
	before := fileSize(t, data)

	other := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, other)
	b.Field(0).(*array.Int32Builder).Append(1)
	b.Field(1).(*array.StringBuilder).Append("x")
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	_, err := e.Append(context.Background(), "t", 0, rec)
	if !errors.Is(err, ErrSchemaMismatch) || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `"id"`) {
		t.Fatalf("got %v, want ErrSchemaMismatch naming field \"id\"", err)
	}
	if got := fileSize(t, data); got != before {
		t.Fatalf("data file grew from %d to %d bytes on a refused append", before, got)
	}
	if pos := mustAppend(t, e, "t", 0, 2, 1); pos != 2 {
		t.Fatalf("next append got position %d, want 2", pos)
	}
	// Re-registering with another schema or shard count is refused.
	if _, err := e.CreateTable(context.Background(), "t", other, 1); !errors.Is(err, ErrTableConflict) || !strings.Contains(err.Error(), `"id"`) {
		t.Fatalf("re-register with another schema: got %v", err)
	}
	if _, err := e.CreateTable(context.Background(), "t", testSchema, 3); !errors.Is(err, ErrTableConflict) {
		t.Fatalf("re-register with another shard count: got %v", err)
	}
	if _, err := e.CreateTable(context.Background(), "t", testSchema, 1); err != nil {
		t.Fatalf("identical re-register: %v", err)
	}
}

func TestHostileNamesAndShards(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	ctx := context.Background()
	for _, name := range []string{"", "../x", "a/b", "..", ".hidden", "-rf", "a b", "x\x00y", "é", strings.Repeat("a", 129)} {
		if _, err := e.CreateTable(ctx, name, testSchema, 1); !errors.Is(err, ErrBadName) || !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("create %q: got %v, want ErrBadName", name, err)
		}
		if _, err := e.Table(ctx, name); !errors.Is(err, ErrBadName) {
			t.Errorf("table %q: got %v, want ErrBadName", name, err)
		}
	}
	if _, err := e.CreateTable(ctx, strings.Repeat("a", 128), testSchema, 1); err != nil {
		t.Fatalf("128-byte name refused: %v", err)
	}
	if _, err := e.CreateTable(ctx, "zero", testSchema, 0); !errors.Is(err, ErrBadShard) {
		t.Fatalf("0 shards: got %v", err)
	}
	mustCreate(t, e, "t", 2)
	rec := testRecord(t, 1, 1)
	defer rec.Release()
	for _, sh := range []int{-1, 2} {
		if _, err := e.Append(ctx, "t", sh, rec); !errors.Is(err, ErrBadShard) || !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("shard %d: got %v, want ErrBadShard", sh, err)
		}
	}
	_, err := e.Append(ctx, "nope", 0, rec)
	if !errors.Is(err, ErrUnknownTable) || !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown table: got %v", err)
	}
	ents, _ := os.ReadDir(dir + "/tables")
	if len(ents) != 2 {
		t.Fatalf("tables dir has %d entries, want 2 (the 128-byte name and t)", len(ents))
	}
	if _, err := os.Stat(dir + "/x"); !os.IsNotExist(err) {
		t.Fatal("a hostile name escaped the tables directory")
	}
}

func TestEpochCASOneWinner(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	ctx := context.Background()
	for round := uint64(0); round < 5; round++ {
		const n = 8
		var wg sync.WaitGroup
		results := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, results[i] = e.AdvanceEpoch(ctx, "t", round)
			}(i)
		}
		wg.Wait()
		wins := 0
		for _, err := range results {
			var ce *EpochConflictError
			switch {
			case err == nil:
				wins++
			case errors.As(err, &ce) && errors.Is(err, ErrEpochConflict) && errors.Is(err, errs.ErrConflict):
				if ce.Current != round+1 {
					t.Fatalf("conflict reports current %d, want %d", ce.Current, round+1)
				}
			default:
				t.Fatalf("unexpected error %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners", round, wins)
		}
	}
	e.Close()
	e = openTest(t, dir, Options{})
	if ep, err := e.Epoch(ctx, "t"); err != nil || ep != 5 {
		t.Fatalf("epoch after reopen %d, %v; want 5", ep, err)
	}
}

func TestTrim(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	mustCreate(t, e, "t", 1)
	ctx := context.Background()
	for i := 1; i <= 6; i++ {
		mustAppend(t, e, "t", 0, int64(i), 1)
		if i%2 == 0 {
			if _, err := e.Seal(ctx, "t", 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustAppend(t, e, "t", 0, 7, 1) // open generation 7..7
	ep, err := e.AdvanceEpoch(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Trim(ctx, "t", 0, 4, ep-1); !errors.Is(err, ErrStaleEpoch) || !errors.Is(err, errs.ErrFenced) {
		t.Fatalf("stale trim: got %v", err)
	}
	if g, _ := e.Generations(ctx, "t", 0); len(g) != 4 {
		t.Fatalf("stale trim removed generations: %+v", g)
	}
	// Through 5 drops 1..2 and 3..4 but not 5..6, which it only partly covers.
	got, err := e.Trim(ctx, "t", 0, 5, ep)
	if err != nil || got != 4 {
		t.Fatalf("trim: %d, %v; want 4", got, err)
	}
	if _, err := e.Trim(ctx, "t", 0, 99, ep); !errors.Is(err, ErrBadRange) {
		t.Fatalf("trim beyond the end: got %v", err)
	}
	err = e.Read(ctx, "t", 0, 4, 0, func(Entry) error { return nil })
	if !errors.Is(err, ErrTrimmed) || !strings.Contains(err.Error(), "4") {
		t.Fatalf("read of trimmed position: got %v", err)
	}
	st, err := e.Stats(ctx, "t", map[int]uint64{0: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := st.Shards[0]
	if s.TrimmedThrough != 4 || !s.WatermarkBehindTrim || s.SealedGenerations != 1 || s.OpenGenerations != 1 || s.LastPosition != 7 || s.PendingGenerations != 1 {
		t.Fatalf("stats %+v", s)
	}
	e.Close()
	e = openTest(t, dir, Options{})
	if ids := readIDs(t, e, "t", 0, 5, 0); len(ids) != 3 || ids[7] != 7 {
		t.Fatalf("after reopen read %v", ids)
	}
	st, _ = e.Stats(ctx, "t", nil)
	if st.Shards[0].TrimmedThrough != 4 {
		t.Fatalf("trimmed-through not durable: %+v", st.Shards[0])
	}
	// Trim everything; positions continue after the trimmed point.
	e.Seal(ctx, "t", 0)
	if got, err := e.Trim(ctx, "t", 0, 7, ep); err != nil || got != 7 {
		t.Fatalf("trim all: %d %v", got, err)
	}
	e.Close()
	e = openTest(t, dir, Options{})
	if pos := mustAppend(t, e, "t", 0, 8, 1); pos != 8 {
		t.Fatalf("append after trimming everything got %d, want 8", pos)
	}
}

func TestAgeSealing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	e := openTest(t, t.TempDir(), Options{Clock: clk, MaxGenerationAge: 10 * time.Second})
	mustCreate(t, e, "t", 1)
	mustAppend(t, e, "t", 0, 1, 1)
	ctx := context.Background()
	waitTimer := func() {
		for !clk.HasWaiters() {
			runtimeGosched()
		}
	}
	waitTimer()
	clk.Step(9 * time.Second)
	if g, _ := e.Generations(ctx, "t", 0); len(g) != 1 || g[0].Sealed {
		t.Fatalf("sealed before its age: %+v", g)
	}
	clk.Step(time.Second)
	for {
		g, _ := e.Generations(ctx, "t", 0)
		if len(g) == 1 && g[0].Sealed {
			if !g[0].SealedAt.Equal(clk.Now()) {
				t.Fatalf("sealed at %v, want %v", g[0].SealedAt, clk.Now())
			}
			break
		}
		runtimeGosched()
	}
}

// timerless is a fake clock whose timers never fire: the age sealer, which
// sleeps on one, never acts.
type timerless struct{ *clocktesting.FakeClock }

func (c timerless) NewTimer(time.Duration) clock.Timer { return c.FakeClock.NewTimer(1 << 62) }

// TestAgeSealingOnAppend: an append to a generation past its age starts a
// new one, the rotation sealing the old, without the age sealer (on a busy
// shard it may find no moment without a sync or write in flight).
func TestAgeSealingOnAppend(t *testing.T) {
	clk := timerless{clocktesting.NewFakeClock(time.Unix(1_000_000, 0))}
	e := openTest(t, t.TempDir(), Options{Clock: clk, MaxGenerationAge: 10 * time.Second})
	mustCreate(t, e, "t", 1)
	mustAppend(t, e, "t", 0, 1, 1)
	mustAppend(t, e, "t", 0, 2, 1)
	clk.Step(10 * time.Second)
	mustAppend(t, e, "t", 0, 3, 1)
	mustAppend(t, e, "t", 0, 4, 1) // its sync completes the rotation's seal
	g, _ := e.Generations(context.Background(), "t", 0)
	if len(g) != 2 || !g[0].Sealed || g[0].Last != 2 || g[1].Sealed || g[1].First != 3 {
		t.Fatalf("generations %+v, want 1..2 sealed and 3.. open", g)
	}
}

// TestLockedDirectory checks rule 11 against a second engine in this process
// and in another one.
func TestLockedDirectory(t *testing.T) {
	if d := os.Getenv("WAL_TEST_HOLD"); d != "" {
		e, err := Open(d, Options{})
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		os.Stdin.Read(make([]byte, 1))
		e.Close()
		os.Exit(0)
	}
	dir := t.TempDir()
	e := openTest(t, dir, Options{})
	_, err := Open(dir, Options{})
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second engine in process: got %v", err)
	}
	e.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestLockedDirectory$")
	cmd.Env = append(os.Environ(), "WAL_TEST_HOLD="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("child did not open the engine: %q %v", buf, err)
	}
	_, err = Open(dir, Options{})
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("got %v, want ErrLocked naming pid %d", err, cmd.Process.Pid)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}
