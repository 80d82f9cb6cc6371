// Package publish moves sealed WAL generations into a Lance table exactly
// once (DESIGN.md §2–3). A Session holds a table's claim and its fenced
// publisher epoch; each Round runs the rule-10 order: fence (once per
// ownership) → re-read latest → adopt or pin the plan → prepare or reuse →
// verify files → commit against the exact parent → confirm durable → trim.
// Workers, catch-up executors and the one-shot CLI commands all publish
// through this package, so they obey the same rules.
package publish

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/walctl/walctl/internal/core/errs"
)

// Keys walctl keeps in the Lance manifest config, written in the same commit
// as the data they describe.
const (
	// KeyEpoch is the publisher epoch of the last fence.
	KeyEpoch = "walctl.epoch"
	// KeyWatermarks is a JSON object: shard number → last published WAL
	// position.
	KeyWatermarks = "walctl.watermarks"
	// KeyPlan is the id of the last published plan.
	KeyPlan = "walctl.plan"
	// KeyFormat is the version of walctl's keys; a newer one fails closed.
	KeyFormat = "walctl.format"
	// KeyCommitter is a JSON Committer: who wrote the version (a fence or
	// a publication), kept so `table history` can name each version's origin.
	KeyCommitter = "walctl.committer"
)

// Committer identifies the process that committed a walctl version: its
// owner id and kind (worker, catchup, cli), and for a catch-up Job the Job
// id and the execution.
type Committer struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	JobID     string `json:"job_id,omitempty"`
	Execution string `json:"execution,omitempty"`
}

// ParseCommitter reads KeyCommitter from a manifest config; ok is false
// when the version records none (older walctl, or a foreign writer).
func ParseCommitter(cfg map[string]string) (Committer, bool) {
	var c Committer
	raw, ok := cfg[KeyCommitter]
	if !ok || json.Unmarshal([]byte(raw), &c) != nil {
		return Committer{}, false
	}
	return c, true
}

func (c Committer) delta(m map[string]string) map[string]string {
	b, _ := json.Marshal(c)
	m[KeyCommitter] = string(b)
	return m
}

// formatVersion is the version of the keys this binary writes and reads.
const formatVersion = 1

// ErrUnknownFormat is returned for a table whose walctl keys were written by
// a newer walctl.
var ErrUnknownFormat = fmt.Errorf("table written by a newer walctl: %w", errs.ErrCorrupt)

// Watermarks maps a shard to its last published position (0: nothing).
type Watermarks map[int]uint64

// Equal reports whether w and o agree on every shard (absent means 0).
func (w Watermarks) Equal(o Watermarks) bool {
	for s, v := range w {
		if o[s] != v {
			return false
		}
	}
	for s, v := range o {
		if w[s] != v {
			return false
		}
	}
	return true
}

// Clone copies w.
func (w Watermarks) Clone() Watermarks { return maps.Clone(w) }

// State is walctl's view of one Lance version.
type State struct {
	Epoch      uint64
	Watermarks Watermarks
	Plan       string
}

// ParseState reads walctl's keys from a manifest config. A version with no
// walctl keys (a foreign writer dropped them, or a new table) has epoch 0 and
// no watermarks.
func ParseState(cfg map[string]string) (State, error) {
	st := State{Watermarks: Watermarks{}, Plan: cfg[KeyPlan]}
	if f, ok := cfg[KeyFormat]; ok {
		v, err := strconv.Atoi(f)
		if err != nil {
			return st, fmt.Errorf("%s=%q: %v: %w", KeyFormat, f, err, errs.ErrCorrupt)
		}
		if v > formatVersion {
			return st, fmt.Errorf("%s=%d, this walctl knows %d: %w", KeyFormat, v, formatVersion, ErrUnknownFormat)
		}
	}
	if e, ok := cfg[KeyEpoch]; ok {
		v, err := strconv.ParseUint(e, 10, 64)
		if err != nil {
			return st, fmt.Errorf("%s=%q: %v: %w", KeyEpoch, e, err, errs.ErrCorrupt)
		}
		st.Epoch = v
	}
	if w, ok := cfg[KeyWatermarks]; ok {
		raw := map[string]uint64{}
		if err := json.Unmarshal([]byte(w), &raw); err != nil {
			return st, fmt.Errorf("%s=%q: %v: %w", KeyWatermarks, w, err, errs.ErrCorrupt)
		}
		for k, v := range raw {
			s, err := strconv.Atoi(k)
			if err != nil || s < 0 {
				return st, fmt.Errorf("%s: bad shard %q: %w", KeyWatermarks, k, errs.ErrCorrupt)
			}
			st.Watermarks[s] = v
		}
	}
	return st, nil
}

// fenceDelta is the config delta of a fence commit.
func fenceDelta(epoch uint64) map[string]string {
	return map[string]string{KeyEpoch: strconv.FormatUint(epoch, 10), KeyFormat: strconv.Itoa(formatVersion)}
}

// publishDelta is the config delta of a data commit: the new watermarks and
// the plan id. The epoch is not touched: a data commit requires it to equal
// the publisher's already.
func publishDelta(w Watermarks, planID string) map[string]string {
	raw := map[string]uint64{}
	for _, s := range slices.Sorted(maps.Keys(w)) {
		raw[strconv.Itoa(s)] = w[s]
	}
	b, _ := json.Marshal(raw)
	return map[string]string{KeyWatermarks: string(b), KeyPlan: planID, KeyFormat: strconv.Itoa(formatVersion)}
}
