// Package cpuload measures how busy the whole machine's CPUs were over a
// stretch of time, from /proc/stat (read with prometheus/procfs), so that a
// benchmark can tell a run bound by CPU from one bound by the disk: on the
// 2-core development VM a three-replica WAL group and a 1 GiB publication
// kept the machine's two CPUs 78-89% busy on average (the rest mostly I/O
// wait) while their ratios to dd stayed far below 1.
package cpuload

import (
	"fmt"
	"runtime"
	"time"

	"github.com/prometheus/procfs"
)

// MinWindow is the shortest stretch Busy measures. /proc/stat counts in
// clock ticks (USER_HZ, 100 a second on Linux), so a window of a few
// milliseconds may see no tick at all and one of a few ticks says little.
const MinWindow = 50 * time.Millisecond

// Sample is the machine's cumulative CPU time at one moment.
type Sample struct {
	busy, total float64
	cpus        int
}

// Now samples /proc/stat. Where it cannot be read (not Linux) the sample is
// empty and every Busy involving it is zero.
func Now() Sample {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return Sample{}
	}
	st, err := fs.Stat()
	if err != nil || len(st.CPU) == 0 {
		return Sample{}
	}
	c := st.CPUTotal
	// Guest time is already counted in User; idle and I/O wait are not busy.
	busy := c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	return Sample{busy: busy, total: busy + c.Idle + c.Iowait, cpus: len(st.CPU)}
}

// Load is how many of the machine's CPUs were busy on average over a
// window, of how many it has; the zero Load is "not measured" (no
// /proc/stat, or a window shorter than MinWindow). Benchmark results embed
// it: near CPUs, a run was bound by CPU, not by the disk.
type Load struct {
	BusyCPUs float64 `json:"machine_busy_cpus,omitempty"`
	CPUs     int     `json:"machine_cpus,omitempty"`
}

// Busy is the machine's Load between s and the later sample: not measured
// if either sample is empty or the CPUs' clocks advanced by less than
// MinWindow between them.
func (s Sample) Busy(later Sample) Load {
	if s.cpus == 0 || later.cpus != s.cpus || later.total-s.total < MinWindow.Seconds()*float64(s.cpus) {
		return Load{}
	}
	return Load{BusyCPUs: (later.busy - s.busy) / (later.total - s.total) * float64(s.cpus), CPUs: s.cpus}
}

// Text is "1.84 of 2", or "-" where the load was not measured. (Not
// String: the results that embed a Load would print as it.)
func (l Load) Text() string {
	if l.CPUs == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f of %d", l.BusyCPUs, l.CPUs)
}

// Check says what is wrong, if anything, with a Load measured over a
// window of the given wall-clock seconds: on Linux, a window of twice
// MinWindow or more is measured, with every CPU the process sees and a
// share between none and all of them (a run waiting on fsync may see no
// busy tick in a short window); a shorter one is either that or not
// measured; elsewhere nothing is measured. Tests of the benchmarks that
// report the figure use it.
func (l Load) Check(seconds float64) error {
	unmeasured := l == Load{}
	switch {
	case runtime.GOOS != "linux" && !unmeasured:
		return fmt.Errorf("no /proc/stat on %s, yet the machine's CPUs were %s busy", runtime.GOOS, l.Text())
	case runtime.GOOS != "linux", unmeasured && seconds < 2*MinWindow.Seconds():
		return nil
	case l.CPUs < runtime.NumCPU() || l.BusyCPUs < 0 || l.BusyCPUs > float64(l.CPUs)+0.01:
		return fmt.Errorf("the machine's CPUs were %.2f of %d busy over %.3fs (this process sees %d)", l.BusyCPUs, l.CPUs, seconds, runtime.NumCPU())
	}
	return nil
}
