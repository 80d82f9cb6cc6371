// Package cpuload measures how busy the whole machine's CPUs were over a
// stretch of time, from /proc/stat (read with prometheus/procfs), so that a
// benchmark can tell a run bound by CPU from one bound by the disk: on the
// 2-core development VM a three-replica WAL group and a 1 GiB publication
// kept the machine's two CPUs 78-89% busy on average (the rest mostly I/O
// wait) while their ratios to dd stayed far below 1.
package cpuload

import "github.com/prometheus/procfs"

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

// Busy is how many of the machine's CPUs were busy on average between s
// and the later sample, and how many it has: (0, 0) if either sample is
// empty or no time passed.
func (s Sample) Busy(later Sample) (busy float64, cpus int) {
	if s.cpus == 0 || later.cpus != s.cpus || later.total <= s.total {
		return 0, 0
	}
	return (later.busy - s.busy) / (later.total - s.total) * float64(s.cpus), s.cpus
}
