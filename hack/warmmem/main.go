// Command warmmem touches most of this machine's free memory once, so that
// benchmarks measure the steady state of a host that has been up a while.
//
// On a VM whose hypervisor backs guest memory lazily, the first touch of a
// guest page costs far more than any later one: here ~11 µs per 4 KiB page
// (~350 MiB/s), and writing 2 GiB into page-cache pages never used before
// ran at 210-300 MB/s, at 1.4-1.7 GB/s once the memory had been touched (the
// same dd). The benchmarks' dd baseline deletes its file and reuses the same
// pages, while a WAL or a Lance table keeps what it wrote and keeps taking
// fresh pages: on an unwarmed machine every ratio to dd measures the
// hypervisor.
//
// Warming lasts only as long as the guest keeps the memory. With free page
// reporting (the virtio balloon's page_reporting module, on the development
// VM at order 9: every free 2 MiB block), memory the guest frees — a
// deleted file's page cache, this program's own memory when it exits — is
// handed back to the host within seconds and is new again on its next
// touch. warmmem says when reporting is on. To measure as on a machine
// without it (root; put it back after):
//
//	echo 11 > /sys/module/page_reporting/parameters/page_reporting_order  # above the largest order: reports nothing
//	go run ./hack/warmmem
//	...                                                                   # the benchmarks
//	echo 9 > /sys/module/page_reporting/parameters/page_reporting_order
//
// Run this once before `walctl bench`:
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
	if order, err := os.ReadFile(reportingOrder); err == nil && strings.TrimSpace(string(order)) != "" {
		if o, err := strconv.Atoi(strings.TrimSpace(string(order))); err == nil && o <= maxPageOrder {
			fmt.Printf("free page reporting is on (order %d, %s): memory freed from now on, this program's included, goes back to the host and is slow to touch again\n", o, reportingOrder)
		}
	}
}

// reportingOrder is the smallest block (as a page order) the guest reports
// free to the host; above maxPageOrder nothing is reported.
const (
	reportingOrder = "/sys/module/page_reporting/parameters/page_reporting_order"
	maxPageOrder   = 10
)

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
