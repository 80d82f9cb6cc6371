package wal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/durable"
)

// Append implements Log. The record is validated and encoded before the
// shard is touched; cancellation is honoured until the entry is written,
// after which Append waits for its sync (a bounded wait) so that a returned
// position is always durable and a nil error is never ambiguous.
func (e *Engine) Append(ctx context.Context, name string, shard int, rec arrow.RecordBatch) (uint64, error) {
	if err := e.enter(ctx); err != nil {
		return 0, err
	}
	defer e.life.RUnlock()
	t, s, err := e.shard(name, shard)
	if err != nil {
		return 0, err
	}
	enc, err := e.encode(name, t, rec)
	if err != nil {
		return 0, err
	}
	defer enc.release()
	if err := ctx.Err(); err != nil {
		return 0, ctxErr(err)
	}
	return s.append(enc.raw)
}

// AppendBatch appends recs to one shard in order, sharing one sync, and
// returns their positions once all are durable. Every record is validated
// and encoded first: if one fails (ErrSchemaMismatch, ErrBadRange), nothing
// is written. A failure after writing began is like Append's: an entry is
// wholly present or absent, and recovery keeps a prefix of the positions.
// The replicated WAL (package walraft) applies a run of committed appends
// with it: one sync instead of one per entry.
func (e *Engine) AppendBatch(ctx context.Context, name string, shard int, recs []arrow.RecordBatch) ([]uint64, error) {
	if err := e.enter(ctx); err != nil {
		return nil, err
	}
	defer e.life.RUnlock()
	t, s, err := e.shard(name, shard)
	if err != nil {
		return nil, err
	}
	raws, release, err := e.encodeAll(name, t, recs)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := ctx.Err(); err != nil {
		return nil, ctxErr(err)
	}
	return s.appendAll(raws)
}

// CheckAppend tells whether Append would accept rec for the shard,
// without writing anything: the same validation, the same errors.
func (e *Engine) CheckAppend(ctx context.Context, name string, shard int, rec arrow.RecordBatch) error {
	enc, err := e.Encode(ctx, name, shard, rec)
	if err == nil {
		enc.Release()
	}
	return err
}

// encodeAll validates and encodes records for table t; release frees them.
func (e *Engine) encodeAll(name string, t *table, recs []arrow.RecordBatch) (raws [][]byte, release func(), err error) {
	var encs []encodedEntry
	release = func() {
		for _, enc := range encs {
			enc.release()
		}
	}
	for _, rec := range recs {
		enc, err := e.encode(name, t, rec)
		if err != nil {
			release()
			return nil, nil, err
		}
		encs = append(encs, enc)
		raws = append(raws, enc.raw)
	}
	return raws, release, nil
}

// encode validates and encodes one record for table t, within the entry
// size limit.
func (e *Engine) encode(name string, t *table, rec arrow.RecordBatch) (encodedEntry, error) {
	enc, err := encodeEntry(name, t.schema, t.schemaBytes, rec)
	if err != nil {
		return enc, err
	}
	if int64(len(enc.raw)) > e.opts.MaxEntryBytes {
		enc.release()
		return encodedEntry{}, fmt.Errorf("table %q: entry of %d bytes exceeds the limit of %d: %w", name, len(enc.raw), e.opts.MaxEntryBytes, ErrBadRange)
	}
	return enc, nil
}

// Seal implements Log. It is not cancellable once started.
func (e *Engine) Seal(ctx context.Context, name string, shard int) (Generation, error) {
	if err := e.enter(ctx); err != nil {
		return Generation{}, err
	}
	defer e.life.RUnlock()
	_, s, err := e.shard(name, shard)
	if err != nil {
		return Generation{}, err
	}
	return s.seal()
}

// Generations implements Log.
func (e *Engine) Generations(ctx context.Context, name string, shard int) ([]Generation, error) {
	if err := e.enter(ctx); err != nil {
		return nil, err
	}
	defer e.life.RUnlock()
	_, s, err := e.shard(name, shard)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listing(), nil
}

// listing describes the shard's generations holding durable entries and its
// damaged or quarantined ranges (as sealed generations with Damaged set, so
// that a publisher planning over them reads them and fails loudly instead
// of stopping silently), ordered by position, under s.mu.
func (s *shard) listing() []Generation {
	var out []Generation
	for _, g := range s.gens {
		if d := s.describe(g); d.Entries > 0 {
			out = append(out, d)
		}
	}
	if len(s.holes) == 0 {
		return out
	}
	for _, h := range s.holes {
		out = append(out, h.generation())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	return out
}

// Trim implements Log. The epoch check and the trim happen under the
// table's epoch lock, so no AdvanceEpoch interleaves. Not cancellable once
// started.
func (e *Engine) Trim(ctx context.Context, name string, shard int, through, epoch uint64) (uint64, error) {
	if err := e.enter(ctx); err != nil {
		return 0, err
	}
	defer e.life.RUnlock()
	t, s, err := e.shard(name, shard)
	if err != nil {
		return 0, err
	}
	t.epochMu.Lock()
	defer t.epochMu.Unlock()
	if t.epochErr != nil {
		return 0, t.epochErr
	}
	if epoch != t.epoch {
		return 0, fmt.Errorf("table %q: trim with epoch %d refused, current epoch is %d: %w", name, epoch, t.epoch, ErrStaleEpoch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.holes {
		if h.rep.First <= through {
			return 0, fmt.Errorf("table %q shard %d: trim through %d reaches unreadable positions: %w", name, shard, through, h.rep.err())
		}
	}
	if through > s.synced {
		return 0, fmt.Errorf("table %q shard %d: trim through %d beyond last position %d: %w", name, shard, through, s.synced, ErrBadRange)
	}
	n := 0
	for n < len(s.gens) && s.gens[n].sealed && s.gens[n].last() <= through {
		n++
	}
	if n == 0 {
		return s.trimmed, nil
	}
	newTrim := s.gens[n-1].last()
	if err := writeUint(s.dir, trimmedFileName, newTrim); err != nil {
		if errors.Is(err, durable.ErrSyncFailed) {
			// The shard directory's state is unknown: stop the shard.
			return s.trimmed, s.fail(fmt.Sprintf("record trim through %d", newTrim), err)
		}
		return s.trimmed, fmt.Errorf("table %q shard %d: record trim through %d: %v: %w", name, shard, newTrim, err, ErrIO)
	}
	s.trimmed = newTrim
	after := s.readSeq
	dropped := s.gens[:n]
	s.gens = append([]*gen(nil), s.gens[n:]...)
	// The trim is recorded and no call can reach the dropped generations
	// any more: delete their files in the background (an unlink waits for
	// the file system to free the blocks, which the caller need not wait
	// for). Close waits for the deletions; leftovers of a crash are removed
	// by the next Open.
	e.removers.Add(1)
	go e.removeTrimmed(s, dropped, after)
	return newTrim, nil
}

// removeTrimmed keeps the files of trimmed generations for reuse, up to the
// shard's cap, and deletes the others, then syncs their shard directory
// once. A failure only leaves files the next Open deletes (the
// trimmed-through position is already durable).
func (e *Engine) removeTrimmed(s *shard, dropped []*gen, after uint64) {
	defer e.removers.Done()
	dir := s.dir
	for _, g := range dropped {
		if s.keepTrimmed(g, after) {
			continue
		}
		for _, p := range []string{g.idxPath, g.dataPath} {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				e.opts.Logger.Warn("wal: removing trimmed generation", "file", p, "err", err)
			}
		}
	}
	if err := durable.SyncDir(dir); err != nil {
		e.opts.Logger.Warn("wal: syncing shard directory after trim", "dir", dir, "err", err)
	}
}

// Stats implements Log.
func (e *Engine) Stats(ctx context.Context, name string, watermarks map[int]uint64) (TableStats, error) {
	if err := e.enter(ctx); err != nil {
		return TableStats{}, err
	}
	defer e.life.RUnlock()
	t, err := e.table(name)
	if err != nil {
		return TableStats{}, err
	}
	for sh := range watermarks {
		if err := checkShard(name, sh, len(t.shards)); err != nil {
			return TableStats{}, err
		}
	}
	now := e.opts.Clock.Now()
	st := TableStats{Table: name, Epoch: t.info().Epoch}
	for i, s := range t.shards {
		st.Shards = append(st.Shards, s.stats(watermarks[i], now))
	}
	return st, nil
}

func (s *shard) stats(wm uint64, now time.Time) ShardStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := ShardStats{Shard: s.id, LastPosition: s.synced, TrimmedThrough: s.trimmed, Watermark: wm,
		WatermarkBehindTrim: wm < s.trimmed, Damage: s.damage()}
	for _, d := range s.listing() {
		ss.Entries += int64(d.Entries)
		ss.Bytes += d.Bytes
		if !d.Sealed {
			ss.OpenGenerations++
			continue
		}
		ss.SealedGenerations++
		if d.Last > wm {
			if ss.PendingGenerations == 0 && !d.SealedAt.IsZero() {
				ss.OldestPendingAge = max(now.Sub(d.SealedAt), 0)
			}
			ss.PendingGenerations++
			ss.PendingBytes += d.Bytes
		}
	}
	return ss
}

// readSpan is one generation's part of a read, snapshotted under the lock.
type readSpan struct {
	path  string
	first uint64
	ents  []entryMeta
}

// Read implements Log. Cancellation is checked before each entry. Entries
// are read from disk one at a time and their checksums verified.
func (e *Engine) Read(ctx context.Context, name string, shard int, from, to uint64, fn func(Entry) error) error {
	if err := e.enter(ctx); err != nil {
		return err
	}
	defer e.life.RUnlock()
	t, s, err := e.shard(name, shard)
	if err != nil {
		return err
	}
	spans, from, to, ticket, err := s.plan(from, to)
	if err != nil || from > to {
		return err
	}
	defer s.endRead(ticket)
	for _, sp := range spans {
		if err := func() error {
			f, err := os.Open(sp.path)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("table %q shard %d: positions from %d were trimmed during the read: %w", name, shard, sp.first, ErrTrimmed)
			}
			if err != nil {
				return err
			}
			defer f.Close()
			for i, m := range sp.ents {
				pos := sp.first + uint64(i)
				if pos < from || pos > to {
					continue
				}
				if err := ctx.Err(); err != nil {
					return ctxErr(err)
				}
				// Each entry gets its own buffer (a recycled one if the
				// caller asked): the decoded record's buffers point into
				// it (no second copy of the payload).
				raw, put := readBuffer(ctx, m.n)
				if err := readFull(f, raw, m.off); err != nil || crc32c(raw) != m.crc {
					if put != nil {
						put()
					}
					return fmt.Errorf("%s (position %d): entry at offset %d length %d fails its checksum (%v): %w", sp.path, pos, m.off, m.n, err, ErrCorruptEntry)
				}
				rec, err := decodeEntryOwned(t.schemaBytes, raw, put)
				if err != nil {
					return fmt.Errorf("%s (position %d): entry does not decode: %v: %w", sp.path, pos, err, ErrCorruptEntry)
				}
				err = fn(Entry{Position: pos, Record: rec, Raw: raw})
				rec.Release()
				if err != nil {
					return err
				}
			}
			return nil
		}(); err != nil {
			return err
		}
	}
	return nil
}

// plan checks a read range and snapshots the generations it covers.
//
// A plan that returns spans registers a read (recycle_gen.go): the caller
// ends it with endRead(ticket).
func (s *shard) plan(from, to uint64) (spans []readSpan, _, _, ticket uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if to == 0 {
		if s.frozen != nil {
			return nil, 0, 0, 0, s.frozen
		}
		to = s.synced
		if from == s.synced+1 {
			return nil, from, to, 0, nil // nothing new: an empty read
		}
	}
	switch {
	case from == 0 || from > to:
		return nil, 0, 0, 0, fmt.Errorf("table %q shard %d: read %d..%d: %w", s.t.name, s.id, from, to, ErrBadRange)
	case from <= s.trimmed:
		return nil, 0, 0, 0, fmt.Errorf("table %q shard %d: read from %d, but positions through %d are trimmed: %w", s.t.name, s.id, from, s.trimmed, ErrTrimmed)
	}
	for _, h := range s.holes {
		// Nothing past damage is served: a reader must not skip it.
		if h.rep.First <= to {
			return nil, 0, 0, 0, fmt.Errorf("table %q shard %d: read %d..%d: %w", s.t.name, s.id, from, to, h.rep.err())
		}
	}
	switch {
	case to > s.synced:
		return nil, 0, 0, 0, fmt.Errorf("table %q shard %d: read through %d, but the last position is %d: %w", s.t.name, s.id, to, s.synced, ErrBeyondEnd)
	}
	for _, g := range s.gens {
		n := len(g.ents)
		if n == 0 || g.first > to || g.first+uint64(n)-1 < from {
			continue
		}
		spans = append(spans, readSpan{path: g.dataPath, first: g.first, ents: g.ents[:n:n]})
	}
	if len(spans) > 0 {
		ticket = s.startRead()
	}
	return spans, from, to, ticket, nil
}
