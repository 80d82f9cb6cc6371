// Package progress shows the advance of long work (bytes, records,
// generations, rate, ETA) on a terminal's stderr, redrawn in place, and a
// summary line when the work is done. With --output json, or when stderr is
// not a terminal, the live line is not drawn: scripts see only the summary on
// stderr and the data on stdout.
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
)

// Status is a snapshot of the work.
type Status struct {
	Label string // what is being done, e.g. "publishing orders"
	Done  int64  // units done
	Total int64  // units in all; 0 when unknown
	Bytes bool   // units are bytes (rendered as MiB, rate as MiB/s)
	Extra string // free text appended, e.g. "3 generations"
}

// Reporter draws progress. The zero value is unusable; use New. Methods are
// safe for concurrent use.
type Reporter struct {
	mu      sync.Mutex
	w       io.Writer
	live    bool
	quiet   bool
	now     func() time.Time
	start   time.Time
	drawn   time.Time
	lineLen int
}

// New returns a reporter writing to w. live draws the in-place line (a
// terminal); quiet suppresses the summary too (JSON output).
func New(w io.Writer, live, quiet bool, now func() time.Time) *Reporter {
	if now == nil {
		now = time.Now
	}
	return &Reporter{w: w, live: live && !quiet, quiet: quiet, now: now, start: now()}
}

// Update redraws the line, at most ten times a second.
func (r *Reporter) Update(s Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.live {
		return
	}
	now := r.now()
	if now.Sub(r.drawn) < 100*time.Millisecond && (s.Total == 0 || s.Done < s.Total) {
		return
	}
	r.drawn = now
	line := Format(s, now.Sub(r.start))
	pad := ""
	if n := r.lineLen - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	r.lineLen = len(line)
	fmt.Fprintf(r.w, "\r%s%s", line, pad)
}

// Done clears the live line and prints the summary (unless quiet).
func (r *Reporter) Done(summary string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live && r.lineLen > 0 {
		fmt.Fprintf(r.w, "\r%s\r", strings.Repeat(" ", r.lineLen))
		r.lineLen = 0
	}
	if !r.quiet && summary != "" {
		fmt.Fprintln(r.w, summary)
	}
}

// Format renders one status line: label, amount, percentage, rate and ETA.
func Format(s Status, elapsed time.Duration) string {
	var b strings.Builder
	if s.Label != "" {
		b.WriteString(s.Label)
		b.WriteString(": ")
	}
	amount := func(n int64) string {
		if s.Bytes {
			return humanize.IBytes(uint64(max(n, 0)))
		}
		return humanize.Comma(n)
	}
	b.WriteString(amount(s.Done))
	if s.Total > 0 {
		fmt.Fprintf(&b, " / %s (%.0f%%)", amount(s.Total), 100*float64(s.Done)/float64(s.Total))
	}
	if secs := elapsed.Seconds(); secs > 0 && s.Done > 0 {
		rate := float64(s.Done) / secs
		if s.Bytes {
			fmt.Fprintf(&b, ", %s/s", humanize.IBytes(uint64(rate)))
		} else {
			fmt.Fprintf(&b, ", %s/s", humanize.Comma(int64(rate)))
		}
		if s.Total > s.Done {
			eta := time.Duration(float64(s.Total-s.Done) / rate * float64(time.Second))
			fmt.Fprintf(&b, ", ETA %s", eta.Round(time.Second))
		}
	}
	if s.Extra != "" {
		b.WriteString(", ")
		b.WriteString(s.Extra)
	}
	return b.String()
}
