// Command warmmem touches most of this machine's free memory once, so that
// benchmarks measure the steady state of a host that has been up a while.
//
// On a freshly booted VM whose hypervisor backs guest memory lazily, the
// first touch of every guest page costs far more than any later one: here,
// writing 2 GiB into page-cache pages never used before ran at 210-300 MB/s,
// and at 1.4-1.7 GB/s once the memory had been touched (the same dd). The
// benchmarks' dd baseline deletes its file and reuses the same pages, while
// a WAL or a Lance table keeps what it wrote and keeps taking fresh pages: on
// an unwarmed machine every ratio to dd measures the hypervisor. Run this
// once after boot, before `walctl bench`:
//
//	go run ./hack/warmmem          # 80% of MemAvailable
//	go run ./hack/warmmem -gib 16
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	gib := flag.Int("gib", 0, "GiB to touch (default: 80% of MemAvailable)")
	flag.Parse()
	if *gib <= 0 {
		avail, err := memAvailable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "warmmem:", err)
			os.Exit(1)
		}
		*gib = int(avail * 8 / 10 >> 30)
	}
	const page = 4096
	hold := make([][]byte, 0, *gib)
	start := time.Now()
	for i := 0; i < *gib; i++ {
		t := time.Now()
		b := make([]byte, 1<<30)
		for j := 0; j < len(b); j += page {
			b[j] = 1
		}
		hold = append(hold, b)
		fmt.Printf("GiB %d: %.2f µs per page\n", i+1, float64(time.Since(t).Microseconds())/float64(len(b)/page))
	}
	fmt.Printf("touched %d GiB in %s\n", len(hold), time.Since(start).Round(time.Millisecond))
}

// memAvailable reads MemAvailable from /proc/meminfo, in bytes.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no MemAvailable in /proc/meminfo")
}
