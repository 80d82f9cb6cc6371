package executor

import (
	"runtime/debug"

	"github.com/walctl/walctl/internal/core/budget"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/walcache"
)

// RuntimeOverhead is what an executor process needs beyond its merge
// buffers and cache: the Go runtime, the etcd and WAL clients, Lance
// encoders' fixed state. The process's soft memory limit is merge buffer +
// cache + this.
const RuntimeOverhead = 48 << 20

// Memory is an execution's memory: one budget of merge-buffer + cache
// bytes, shared by the publisher's merges (publish.Config.Budget) and the
// cache of decoded WAL entries (publish.Config.Cache), whose entries hold
// their bytes against it. The cache never exceeds cacheBytes and never
// waits for bytes, so merges always have their merge-buffer bytes.
type Memory struct {
	Budget *budget.Budget
	Cache  *walcache.Cache
}

// NewMemory returns the budget and cache of an execution (no cache when
// cacheBytes <= 0).
func NewMemory(mergeBytes, cacheBytes int64) Memory {
	b := budget.New(mergeBytes + max(0, cacheBytes))
	m := Memory{Budget: b}
	if cacheBytes > 0 {
		m.Cache = walcache.New(cacheBytes, b, publish.RecordBytes)
	}
	return m
}

// LimitProcess sets the Go runtime's soft memory limit to the budget plus
// RuntimeOverhead, so that garbage is collected before the heap outgrows
// what the budgets promise (the budget bounds live bytes; without a limit
// the runtime lets garbage grow the heap to twice the live bytes). A limit
// set by the operator (GOMEMLIMIT) is kept. It returns the limit in force.
func (m Memory) LimitProcess(operatorSet bool) int64 {
	if operatorSet {
		return debug.SetMemoryLimit(-1)
	}
	limit := m.Budget.Total() + RuntimeOverhead
	debug.SetMemoryLimit(limit)
	return limit
}
