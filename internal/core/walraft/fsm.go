package walraft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

const (
	walDir     = "wal"
	restoreDir = "wal.restore"
	oldDir     = "wal.old"
)

// result is what Apply returns to the proposer's future.
type result struct {
	info  wal.TableInfo
	pos   uint64
	gen   wal.Generation
	epoch uint64
	trim  uint64
	err   error
}

// fsm applies committed commands to the single-directory engine on
// <dir>/wal, one at a time, recording its progress so a restart neither
// skips nor repeats a command (see applied.go and doc.go).
type fsm struct {
	dir  string
	opts wal.Options
	clk  *applyClock
	log  *slog.Logger

	mu      sync.RWMutex // exclusive only while Restore swaps the engine
	eng     *wal.Engine
	applied *appliedStore
	// index is the highest raft index known applied; pending is set when a
	// restart found command pending.Index possibly applied.
	index   atomic.Uint64
	pending *appliedRec
	// broken is set when a command failed for a local reason (I/O): the
	// replica stops applying, so it can never diverge; a restart resumes.
	broken atomic.Pointer[error]
	// onRestoreEntry, when set (tests), runs before each entry a snapshot
	// install appends; an error aborts the install as a crash would.
	onRestoreEntry atomic.Pointer[func(table string, pos uint64) error]
}

// openFSM finishes or undoes an interrupted snapshot install, then opens
// the engine and the progress record.
func openFSM(dir string, opts wal.Options, log *slog.Logger) (*fsm, error) {
	clk := &applyClock{}
	opts.Clock = clk
	opts.MaxGenerationAge = -1 // only the leader seals by age, through the log
	opts.Logger = log
	f := &fsm{dir: dir, opts: opts, clk: clk, log: log}
	if err := f.cleanInstall(); err != nil {
		return nil, err
	}
	eng, err := wal.Open(filepath.Join(dir, walDir), opts)
	if err != nil {
		return nil, err
	}
	ap, err := openApplied(dir)
	if err != nil {
		eng.Close()
		return nil, err
	}
	f.eng, f.applied = eng, ap
	f.index.Store(ap.rec.certain())
	if ap.rec.Pending && ap.rec.Last == 0 {
		r := ap.rec
		f.pending = &r
	}
	return f, nil
}

// cleanInstall removes what a killed snapshot install left behind. The
// install is then redone from the snapshot store (Node.Open).
func (f *fsm) cleanInstall() error {
	cur, old := filepath.Join(f.dir, walDir), filepath.Join(f.dir, oldDir)
	if _, err := os.Stat(cur); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(old); err == nil {
			f.log.Warn("walraft: undoing an interrupted snapshot swap", "dir", f.dir)
			if err := durable.Rename(old, cur); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{restoreDir, oldDir} {
		p := filepath.Join(f.dir, d)
		if _, err := os.Stat(p); err == nil {
			f.log.Warn("walraft: removing an interrupted snapshot install", "path", p)
			if err := removeTree(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func removeTree(p string) error {
	if err := os.RemoveAll(p); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(p))
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if b := f.broken.Load(); b != nil {
		return result{err: *b}
	}
	if l.Index <= f.index.Load() {
		return result{err: fmt.Errorf("raft index %d already applied: %w", l.Index, ErrOutcomeUnknown)}
	}
	c, err := decodeCommand(l.Data)
	if err != nil {
		return f.fail(l.Index, err)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	ctx := context.Background()
	if p := f.pending; p != nil && p.Index == l.Index {
		if !idempotent(c.Op) {
			now, err := f.decidableFingerprint(ctx, c)
			if err != nil {
				return f.fail(l.Index, err) // the record stays: decided after a restart
			}
			if !sameState(c.Op, now, p.FP) {
				f.pending = nil
				f.index.Store(l.Index) // it landed before the restart
				return result{err: fmt.Errorf("raft index %d applied before a restart: %w", l.Index, ErrOutcomeUnknown)}
			}
		}
		f.pending = nil
	}
	rec := appliedRec{Index: l.Index, Pending: true}
	if !idempotent(c.Op) {
		fp, err := f.decidableFingerprint(ctx, c)
		if err != nil {
			return f.fail(l.Index, err)
		}
		rec.FP = fp
	}
	if err := f.applied.write(rec); err != nil {
		return f.fail(l.Index, err)
	}
	res := f.apply(ctx, c)
	if res.err != nil && !deterministic(res.err) {
		return f.fail(l.Index, res.err)
	}
	f.index.Store(l.Index)
	return res
}

// fail stops the replica applying: a command that failed for a local reason
// must not be skipped (the others applied it).
func (f *fsm) fail(index uint64, err error) result {
	err = fmt.Errorf("replica stopped applying at raft index %d (restart it to resume): %w", index, err)
	f.broken.CompareAndSwap(nil, &err)
	f.log.Error("walraft: apply failed; replica stops applying", "index", index, "err", err)
	return result{err: err}
}

// idempotent commands give the same state when applied twice in a row.
func idempotent(o op) bool { return o == opCreate || o == opTrim }

// deterministic errors are rejections every replica makes identically.
func deterministic(err error) bool {
	for _, e := range []error{errs.ErrInvalid, errs.ErrNotFound, errs.ErrConflict, errs.ErrFenced} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// fingerprint summarises the state command c changes, so that whether c
// landed can be told from the state alone when only c is in doubt.
func (f *fsm) fingerprint(ctx context.Context, c command) string {
	if c.Op == opAdvance {
		e, err := f.eng.Epoch(ctx, c.Table)
		return fmt.Sprintf("epoch=%d err=%v", e, err)
	}
	gens, err := f.eng.Generations(ctx, c.Table, c.Shard)
	if err != nil || len(gens) == 0 {
		return fmt.Sprintf("gens=0 err=%v", err)
	}
	g := gens[len(gens)-1]
	return fmt.Sprintf("gens=%d last=%d sealed=%v", len(gens), g.Last, g.Sealed)
}

// sameState tells whether two fingerprints of the state command op changes
// say it did not land. An append lands exactly when the shard's last
// position moves: recovery may seal the last generation (completing a
// rotation the append began, whose new generation it removed) without the
// append being there, so for appends only the position counts.
func sameState(o op, a, b string) bool {
	if o != opAppend && o != opAppendEntry {
		return a == b
	}
	return lastField(a) == lastField(b)
}

// lastField is the "last=N" part of an append's fingerprint (the whole
// fingerprint when it has none: an empty shard, or an error).
func lastField(fp string) string {
	for _, f := range strings.Fields(fp) {
		if strings.HasPrefix(f, "last=") {
			return f
		}
	}
	return fp
}

// errUndecidable marks a shard whose end recovery could not establish
// (damage or a failed sync freezes it): whether a command in doubt landed
// there cannot be told from its state, nor can a new command's fingerprint
// be taken. The replica stops applying (fail) and decides after a restart.
var errUndecidable = errors.New("the shard's end is unknown (damage or a failed sync); the replica stops applying until it is repaired and restarted")

// decidableFingerprint is fingerprint, or errUndecidable for a shard command
// on a shard whose end is unknown.
func (f *fsm) decidableFingerprint(ctx context.Context, c command) (string, error) {
	if c.Op != opAdvance {
		if err := f.shardEndKnown(ctx, c.Table, c.Shard); err != nil {
			return "", err
		}
	}
	return f.fingerprint(ctx, c), nil
}

// shardEndKnown returns errUndecidable, naming the damage, when the shard
// lists damage that reaches its end (not a quarantined range: the shard
// goes on after it). An unknown table or shard is not an error here: its
// commands are refused alike everywhere.
func (f *fsm) shardEndKnown(ctx context.Context, table string, shard int) error {
	st, err := f.eng.Stats(ctx, table, nil)
	if err != nil || shard < 0 || shard >= len(st.Shards) {
		return nil
	}
	for _, d := range st.Shards[shard].Damage {
		if d.Last == 0 && d.Quarantined == "" {
			return fmt.Errorf("%s shard %d: %s: %w", table, shard, d, errUndecidable)
		}
	}
	return nil
}

func (f *fsm) apply(ctx context.Context, c command) result {
	f.clk.set(c.time())
	defer f.clk.clear()
	var r result
	switch c.Op {
	case opCreate:
		schema, err := decodeSchema(c.Payload)
		if err != nil {
			return result{err: err}
		}
		r.info, r.err = f.eng.CreateTable(ctx, c.Table, schema, c.Shards)
	case opAppend, opAppendEntry:
		r = f.applyAppend(ctx, c)
	case opSeal:
		r.gen, r.err = f.eng.Seal(ctx, c.Table, c.Shard)
	case opAdvance:
		r.epoch, r.err = f.eng.AdvanceEpoch(ctx, c.Table, c.Expect)
	case opTrim:
		r.trim, r.err = f.eng.Trim(ctx, c.Table, c.Shard, c.Through, c.Epoch)
	default:
		r.err = fmt.Errorf("unknown command %v: %w", c.Op, errs.ErrCorrupt)
	}
	return r
}

// engine returns the current engine with the read lock held; the caller
// calls release.
func (f *fsm) engine() (*wal.Engine, func(), error) {
	if b := f.broken.Load(); b != nil {
		return nil, nil, *b
	}
	f.mu.RLock()
	return f.eng, f.mu.RUnlock, nil
}

func (f *fsm) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.eng.Close()
	if cerr := f.applied.close(); err == nil {
		err = cerr
	}
	return err
}
