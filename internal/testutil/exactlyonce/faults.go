package exactlyonce

import (
	"fmt"
	"maps"
	"strings"
	"sync"
)

// Faults tallies the faults a harness planned and those that fired. A
// planned fault that never fired (a failpoint not reached, an I/O error
// never injected, a signal for a process that was not there) tested
// nothing, so a run that has one fails. Safe for concurrent use.
type Faults struct {
	mu             sync.Mutex
	planned, fired map[string]int
}

// NewFaults returns an empty tally.
func NewFaults() *Faults { return &Faults{planned: map[string]int{}, fired: map[string]int{}} }

// Plan counts one planned fault of kind.
func (f *Faults) Plan(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.planned[kind]++
}

// Fire counts one fault of kind that fired.
func (f *Faults) Fire(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fired[kind]++
}

// Add adds o's counts to f.
func (f *Faults) Add(o *Faults) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, n := range o.planned {
		f.planned[k] += n
	}
	for k, n := range o.fired {
		f.fired[k] += n
	}
}

// Planned is the number of planned faults of every kind.
func (f *Faults) Planned() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.planned {
		n += c
	}
	return n
}

// Err names every kind of which fewer faults fired than were planned.
func (f *Faults) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var short []string
	for _, k := range f.kinds() {
		if f.fired[k] < f.planned[k] {
			short = append(short, fmt.Sprintf("%s (%d of %d fired)", k, f.fired[k], f.planned[k]))
		}
	}
	if len(short) > 0 {
		return fmt.Errorf("planned faults that never fired: %s", strings.Join(short, ", "))
	}
	return nil
}

// String lists every kind, one a line: planned, fired.
func (f *Faults) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, k := range f.kinds() {
		fmt.Fprintf(&b, "  %5d planned %5d fired  %s\n", f.planned[k], f.fired[k], k)
	}
	return b.String()
}

func (f *Faults) kinds() []string {
	all := maps.Clone(f.planned)
	maps.Copy(all, f.fired)
	return sortedKeys(all)
}
