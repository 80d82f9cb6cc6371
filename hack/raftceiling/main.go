// Command raftceiling measures what a bare Raft library commits on this
// machine, for comparison with `walctl bench wal --replicas 3`: three
// replicas in one process, each appending every batch of entries to its own
// log file with one write and one fdatasync, producers proposing 1 MiB
// entries one at a time each, a state machine that does nothing. No walctl
// code runs, so the figure is a ceiling: what a replicated WAL built on the
// library could approach on this disk and these cores, before any client
// hop, transport security, separate processes or applied state.
//
// Each round runs dd conv=fdatasync, then each library, then dd again, and
// prints disk efficiency as `bench wal` defines it: committed MiB/s × 3
// replicas ÷ the round's best dd MiB/s. Medians of the rounds close it.
//
//	go run ./hack/raftceiling                       # three rounds, both libraries
//	go run ./hack/raftceiling -rounds 5 -prealloc   # log files written over, not grown
//
// hashicorp/raft runs over its TCP transport on loopback; go.etcd.io/raft
// has no transport, so its messages are handed between replicas in memory
// (an advantage), and its leader sends entries before persisting them
// (Raft thesis §10.2.1), which hashicorp/raft cannot. -tcp carries
// go.etcd.io/raft's messages over loopback TCP instead (-tls: mutual TLS as
// walctl's peers configure it), and -apply adds walctl's second durable write (the applied engine)
// before a proposal is answered: with both, the figure is the ceiling of a
// walctl group on go.etcd.io/raft, still without the client hop and with
// the three replicas sharing one process.
//
//	go run ./hack/raftceiling -lib etcd -tls -apply
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/walctl/walctl/internal/core/wal/walbench"
)

var (
	dir       = flag.String("dir", os.TempDir(), "directory on the disk to measure")
	producers = flag.Int("producers", 16, "concurrent proposers")
	mib       = flag.Int("mib", 512, "MiB proposed per measurement")
	rounds    = flag.Int("rounds", 3, "rounds")
	prealloc  = flag.Bool("prealloc", false, "zero-fill the log files first, so that appends write over allocated blocks")
	libs      = flag.String("lib", "hashicorp,etcd", "libraries to measure")
	useTCP    = flag.Bool("tcp", false, "go.etcd.io/raft: carry messages over loopback TCP instead of in memory")
	useTLS    = flag.Bool("tls", false, "go.etcd.io/raft: mutual TLS on those connections, walctl's peer configuration (implies -tcp)")
	applied   = flag.Bool("apply", false, "go.etcd.io/raft: each replica also writes committed entries to a second file (one fdatasync per batch) before a proposal is answered, as walctl's applied engine does")
)

// logFile is one replica's durable log: batches appended with one write and
// one fdatasync, as walctl's raft log segments are.
type logFile struct {
	mu  sync.Mutex
	f   *os.File
	off int64
}

func openLog(name string) (*logFile, error) {
	f, err := os.Create(filepath.Join(*dir, name))
	if err != nil {
		return nil, err
	}
	if *prealloc {
		zero := make([]byte, 64<<20)
		for off := int64(0); off < int64(*mib+64)<<20; off += int64(len(zero)) {
			if _, err := f.WriteAt(zero, off); err != nil {
				return nil, err
			}
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
	}
	return &logFile{f: f}, nil
}

func (l *logFile) append(frames [][]byte) error {
	n := 0
	for _, b := range frames {
		n += 16 + len(b)
	}
	buf := make([]byte, 0, n)
	for _, b := range frames {
		buf = append(buf, make([]byte, 16)...) // a frame header's room
		buf = append(buf, b...)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.WriteAt(buf, l.off); err != nil {
		return err
	}
	l.off += int64(len(buf))
	return syscall.Fdatasync(int(l.f.Fd()))
}

func (l *logFile) close() {
	l.f.Close()
	os.Remove(l.f.Name())
}

// propose runs the producers against one proposal function and returns MiB/s.
func propose(apply func(p int, data []byte) error) (float64, error) {
	per := *mib / *producers
	var wg sync.WaitGroup
	errs := make(chan error, *producers)
	start := time.Now()
	for p := 0; p < *producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				data := make([]byte, 1<<20)
				if err := apply(p, data); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(per**producers) / time.Since(start).Seconds(), nil
}

// dd is bench wal's dd measurement (after sync(2)) of 512 MiB in -dir.
func dd() (float64, error) {
	r, err := walbench.DD(context.Background(), *dir, 512)
	return r.MiBps, err
}

func main() {
	flag.Parse()
	*useTCP = *useTCP || *useTLS
	run := map[string]func() (float64, error){"hashicorp": runHashicorp, "etcd": runEtcd}
	names := strings.Split(*libs, ",")
	for _, name := range names {
		if run[name] == nil {
			fail(fmt.Errorf("unknown library %q (hashicorp, etcd)", name))
		}
	}
	eff := map[string][]float64{}
	for r := 1; r <= *rounds; r++ {
		before, err := dd()
		if err != nil {
			fail(err)
		}
		line := fmt.Sprintf("round %d: dd %.0f MiB/s", r, before)
		got := map[string]float64{}
		for _, name := range names {
			walbench.Settle() // as before each bench wal run
			if got[name], err = run[name](); err != nil {
				fail(fmt.Errorf("%s: %w", name, err))
			}
		}
		after, err := dd()
		if err != nil {
			fail(err)
		}
		best := max(before, after)
		for _, name := range names {
			e := got[name] * 3 / best
			eff[name] = append(eff[name], e)
			line += fmt.Sprintf(", %s %.1f MiB/s (efficiency %.2f)", name, got[name], e)
		}
		fmt.Println(line + fmt.Sprintf(", dd %.0f MiB/s", after))
	}
	for _, name := range names {
		e := eff[name]
		slices.Sort(e)
		fmt.Printf("%s: disk efficiency median %.2f [%.2f-%.2f] over %d rounds, %d producers, prealloc=%v", name, e[len(e)/2], e[0], e[len(e)-1], len(e), *producers, *prealloc)
		if name == "etcd" {
			fmt.Printf(" tcp=%v tls=%v apply=%v", *useTCP, *useTLS, *applied)
		}
		fmt.Println()
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "raftceiling:", err)
	os.Exit(1)
}
