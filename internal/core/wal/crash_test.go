package wal

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestCrashDuringConcurrentAppends SIGKILLs a process that appends from
// several goroutines (crossing generation boundaries) and checks, after
// reopening, that every acknowledged entry is present byte for byte at its
// position and that the positions are dense. With tiny generations and many
// producers the kill comes while several rotations await their seal.
func TestCrashDuringConcurrentAppends(t *testing.T) {
	if d := os.Getenv("WAL_TEST_CRASH"); d != "" {
		crashChild(d)
		return
	}
	for _, tc := range []struct {
		producers int
		genBytes  int64
		trim      bool
	}{{4, 32 << 10, false}, {16, 2 << 10, false}, {4, 32 << 10, true}, {16, 2 << 10, true}} {
		t.Run(fmt.Sprintf("producers=%d/generation=%d/trim=%v", tc.producers, tc.genBytes, tc.trim), func(t *testing.T) {
			testCrash(t, tc.producers, tc.genBytes, tc.trim)
		})
	}
}

// testCrash SIGKILLs a child appending with producers (and, with trim,
// trimming sealed generations as they appear, so that new generations are
// written over recycled files), then checks that every acknowledged entry
// after the trimmed-through position is there, byte for byte, that
// positions are dense, and that no entry shows up at a position other than
// the one it was acknowledged at (a recycled file's leftover taken for an
// entry would).
func testCrash(t *testing.T, producers int, genBytes int64, trim bool) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringConcurrentAppends$")
	cmd.Env = append(os.Environ(), "WAL_TEST_CRASH="+dir,
		fmt.Sprintf("WAL_TEST_CRASH_PRODUCERS=%d", producers), fmt.Sprintf("WAL_TEST_CRASH_GEN=%d", genBytes),
		fmt.Sprintf("WAL_TEST_CRASH_TRIM=%v", trim))
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked, ackedAt := map[uint64]int64{}, map[int64]uint64{}
	overlap := producers < 16 // only the many-producer case must overlap rotations
	recycled := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() && (len(acked) < 300 || !overlap || trim && recycled < 20) && len(acked) < 100_000 {
		switch sc.Text() {
		case "rotations-overlap":
			overlap = true
			continue
		case "recycled":
			recycled++
			continue
		}
		var pos uint64
		var id int64
		if _, err := fmt.Sscanf(sc.Text(), "%d %d", &pos, &id); err != nil {
			continue
		}
		if prev, dup := acked[pos]; dup {
			t.Fatalf("position %d acknowledged twice (ids %d and %d)", pos, prev, id)
		}
		acked[pos], ackedAt[id] = id, pos
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if len(acked) < 300 || !overlap || trim && recycled < 20 {
		t.Fatalf("child acknowledged only %d entries (rotations overlapped: %v, generations over recycled files: %d)", len(acked), overlap, recycled)
	}

	e := openTest(t, dir, Options{MaxGenerationBytes: genBytes})
	st, err := e.Stats(context.Background(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := st.Shards[0].TrimmedThrough
	for p := range acked {
		if p <= trimmed {
			delete(acked, p)
		}
	}
	want := trimmed + 1
	err = e.Read(context.Background(), "t", 0, want, 0, func(en Entry) error {
		if en.Position != want {
			return fmt.Errorf("position %d after %d", en.Position, want-1)
		}
		want++
		id := en.Record.Column(0).(*array.Int64).Value(0)
		if at, ok := ackedAt[id]; ok && at != en.Position {
			return fmt.Errorf("position %d holds entry %d, acknowledged at position %d", en.Position, id, at)
		}
		if ackID, ok := acked[en.Position]; ok {
			rec := testRecord(t, ackID, 20)
			defer rec.Release()
			enc, err := encodeEntry("t", testSchema, mustSchemaBytes(t), rec)
			if err != nil {
				return err
			}
			defer enc.release()
			if string(enc.raw) != string(en.Raw) {
				return fmt.Errorf("position %d: bytes differ from the acknowledged entry %d", en.Position, ackID)
			}
			delete(acked, en.Position)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(acked) != 0 {
		t.Fatalf("%d acknowledged entries missing after restart, e.g. %v", len(acked), firstKey(acked))
	}
	if g, _ := e.Generations(context.Background(), "t", 0); len(g) < 2 {
		t.Fatalf("test did not cross generations: %+v", g)
	}
}

func firstKey(m map[uint64]int64) string {
	for k, v := range m {
		return strconv.FormatUint(k, 10) + "=" + strconv.FormatInt(v, 10)
	}
	return ""
}

func mustSchemaBytes(t testing.TB) []byte {
	b, err := EncodeSchema(testSchema)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func crashChild(dir string) {
	producers, _ := strconv.Atoi(os.Getenv("WAL_TEST_CRASH_PRODUCERS"))
	genBytes, _ := strconv.ParseInt(os.Getenv("WAL_TEST_CRASH_GEN"), 10, 64)
	var once sync.Once
	testHookRotated = func(inFlight int) {
		if inFlight > 1 {
			once.Do(func() { fmt.Println("rotations-overlap") })
		}
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	testHookRecycled = func() {
		mu.Lock()
		fmt.Fprintln(w, "recycled")
		w.Flush()
		mu.Unlock()
	}
	e, err := Open(dir, Options{MaxGenerationBytes: genBytes, MaxGenerationAge: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if _, err := e.CreateTable(context.Background(), "t", testSchema, 1); err != nil {
		os.Exit(3)
	}
	if os.Getenv("WAL_TEST_CRASH_TRIM") == "true" {
		go trimSealed(e)
	}
	var wg sync.WaitGroup
	for g := 0; g < producers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				id := int64(g*1_000_000 + i)
				rec := makeRecord(id, 20)
				pos, err := e.Append(context.Background(), "t", 0, rec)
				rec.Release()
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(w, "%d %d\n", pos, id)
				w.Flush()
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
}

// trimSealed trims, every millisecond, all sealed generations but the last
// two, as a publisher keeping up would.
func trimSealed(e *Engine) {
	for ; ; time.Sleep(time.Millisecond) {
		gens, err := e.Generations(context.Background(), "t", 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(5)
		}
		var sealed []Generation
		for _, g := range gens {
			if g.Sealed {
				sealed = append(sealed, g)
			}
		}
		if len(sealed) > 2 {
			if _, err := e.Trim(context.Background(), "t", 0, sealed[len(sealed)-3].Last, 0); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(5)
			}
		}
	}
}
