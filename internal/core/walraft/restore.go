package walraft

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Restore implements raft.FSM: it builds the snapshot's state in
// <dir>/wal.restore through the engine's own API, then swaps it in (rename
// the old engine directory aside, rename the new one into place, record
// the applied index, remove the old one). A restore killed before the swap
// leaves wal.restore, removed at the next open; one killed inside the swap
// is undone at the next open; either way Node.Open then installs the
// snapshot again from the snapshot store, so an install always completes.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	r := bufio.NewReaderSize(rc, 1<<20)
	hdr, err := readHeader(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(f.dir, restoreDir)
	if err := removeTree(tmp); err != nil {
		return err
	}
	if err := f.build(tmp, hdr, r); err != nil {
		return fmt.Errorf("install snapshot at raft index %d: %w", hdr.Applied, err)
	}
	return f.swap(tmp, hdr.Applied)
}

func (f *fsm) build(tmp string, hdr snapHeader, r *bufio.Reader) error {
	ctx := context.Background()
	eng, err := wal.Open(tmp, f.opts)
	if err != nil {
		return err
	}
	for _, t := range hdr.Tables {
		schema, err := decodeSchema(t.Schema)
		if err == nil {
			f.clk.set(time.Unix(0, t.Created).UTC())
			_, err = eng.CreateTable(ctx, t.Name, schema, t.Shards)
			f.clk.clear()
		}
		if err != nil {
			eng.Close()
			return err
		}
	}
	if err := eng.Close(); err != nil {
		return err
	}
	if err := writeCounters(tmp, hdr); err != nil {
		return err
	}
	if eng, err = wal.Open(tmp, f.opts); err != nil {
		return err
	}
	for _, t := range hdr.Tables {
		for i, sh := range t.Shard {
			if err := f.fill(ctx, eng, t.Name, i, sh, r); err != nil {
				eng.Close()
				return err
			}
		}
	}
	return eng.Close()
}

// writeCounters sets each table's epoch and each shard's trimmed-through
// position, in the engine's documented layout (package wal doc.go), so the
// shard's next position is trimmed+1 without replaying trimmed entries.
func writeCounters(tmp string, hdr snapHeader) error {
	for _, t := range hdr.Tables {
		td := filepath.Join(tmp, "tables", t.Name)
		if err := durable.WriteAtomic(filepath.Join(td, "epoch"), []byte(strconv.FormatUint(t.Epoch, 10)+"\n")); err != nil {
			return err
		}
		for i, sh := range t.Shard {
			p := filepath.Join(td, fmt.Sprintf("shard-%04d", i), "trimmed")
			if err := durable.WriteAtomic(p, []byte(strconv.FormatUint(sh.Trimmed, 10)+"\n")); err != nil {
				return err
			}
		}
	}
	return nil
}

// fill appends a shard's entries from the snapshot stream and seals where
// the snapshot's generations were sealed, with their seal times.
func (f *fsm) fill(ctx context.Context, eng *wal.Engine, table string, shard int, sh snapShard, r *bufio.Reader) error {
	defer f.clk.clear()
	g := 0
	for pos := sh.Trimmed + 1; pos <= sh.Last; pos++ {
		for g < len(sh.Gens) && sh.Gens[g].Last < pos {
			g++
		}
		if h := f.onRestoreEntry.Load(); h != nil {
			if err := (*h)(table, pos); err != nil {
				return err
			}
		}
		b, err := readFrame(r)
		if err != nil {
			return err
		}
		rec, err := decodeRecord(b)
		if err != nil {
			return err
		}
		if g > 0 && !sh.Gens[g-1].SealedAt.IsZero() {
			f.clk.set(sh.Gens[g-1].SealedAt)
		}
		got, err := eng.Append(ctx, table, shard, rec)
		rec.Release()
		if err != nil {
			return err
		}
		if got != pos {
			return fmt.Errorf("%s shard %d: snapshot entry %d landed at position %d: %w", table, shard, pos, got, errs.ErrCorrupt)
		}
		if g < len(sh.Gens) && sh.Gens[g].Last == pos && sh.Gens[g].Sealed {
			f.clk.set(sh.Gens[g].SealedAt)
			if _, err := eng.Seal(ctx, table, shard); err != nil {
				return err
			}
		}
	}
	return nil
}

// swap replaces the engine directory by the restored one.
func (f *fsm) swap(tmp string, applied uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, old := filepath.Join(f.dir, walDir), filepath.Join(f.dir, oldDir)
	if err := f.eng.Close(); err != nil {
		f.log.Warn("walraft: closing the engine before a snapshot swap", "err", err)
	}
	if err := durable.Rename(cur, old); err != nil {
		return f.reopenAfter(err)
	}
	if err := durable.Rename(tmp, cur); err != nil {
		return f.reopenAfter(err)
	}
	if err := f.applied.write(appliedRec{Index: applied}); err != nil {
		return f.reopenAfter(err)
	}
	eng, err := wal.Open(cur, f.opts)
	if err != nil {
		return f.reopenAfter(err)
	}
	f.eng = eng
	f.index.Store(applied)
	f.pending = nil
	f.broken.Store(nil)
	f.log.Info("walraft: snapshot installed", "applied", applied)
	return removeTree(old)
}

// reopenAfter marks the replica broken after a failed swap: the next open
// repairs the directories and installs the snapshot again.
func (f *fsm) reopenAfter(err error) error {
	err = fmt.Errorf("snapshot swap failed (restart the replica to finish the install): %w", err)
	f.broken.Store(&err)
	return err
}
