package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/synth"
	"github.com/walctl/walctl/internal/core/wal"
)

// Produce appends records synthetic records with the ids FirstID… to the
// table's shards, round-robin, in batches of batchRows, then seals every
// shard so they are publishable. It returns the WAL bytes appended. It
// stops at the first failed append (whose outcome is that of
// wal.Log.Append); progress, when not nil, is called with the records
// ACKed so far.
func Produce(ctx context.Context, log wal.Log, info wal.TableInfo, firstID, records int64, batchRows int, progress func(done int64)) (bytes int64, err error) {
	gen, err := synth.New(info.Schema, uint64(firstID))
	if err != nil {
		return 0, err
	}
	gen.NextID = firstID
	for done, i := int64(0), 0; done < records; i++ {
		n := min(int64(batchRows), records-done)
		b := gen.Batch(int(n))
		_, err := log.Append(ctx, info.Name, i%info.Shards, b)
		bytes += publish.RecordBytes(b)
		b.Release()
		if err != nil {
			return bytes, err
		}
		done += n
		if progress != nil {
			progress(done)
		}
	}
	for s := 0; s < info.Shards; s++ {
		if _, err := log.Seal(ctx, info.Name, s); err != nil {
			return bytes, err
		}
	}
	return bytes, nil
}

// NextID returns one more than the largest id already in the table's latest
// Lance version or in its unpublished WAL entries (0 + 1 for an empty
// table), so that a new run's ids are new.
func NextID(ctx context.Context, log wal.Log, lanceRoot objstore.Store, info wal.TableInfo) (int64, error) {
	var top int64
	see := func(b arrow.RecordBatch) error {
		ids, ok := b.Column(b.Schema().FieldIndices(synth.IDField)[0]).(*array.Int64)
		if !ok {
			return fmt.Errorf("table %s: column %s is not int64: %w", info.Name, synth.IDField, errs.ErrInvalid)
		}
		for i := 0; i < ids.Len(); i++ {
			top = max(top, ids.Value(i))
		}
		return nil
	}
	if len(info.Schema.FieldIndices(synth.IDField)) == 0 {
		return 0, fmt.Errorf("table %s has no %s column: %w", info.Name, synth.IDField, errs.ErrInvalid)
	}
	w := publish.Watermarks{}
	r, err := publish.OpenReaderOn(lanceRoot, info.Name, publish.Selection{})
	switch {
	case err == nil:
		w = r.State.Watermarks
		if err := r.Scan(ctx, []string{synth.IDField}, see); err != nil {
			return 0, err
		}
	case !errors.Is(err, lance.ErrDatasetNotFound):
		return 0, err
	}
	st, err := log.Stats(ctx, info.Name, w)
	if err != nil {
		return 0, err
	}
	for _, s := range st.Shards {
		if s.LastPosition <= w[s.Shard] {
			continue
		}
		from := max(w[s.Shard], s.TrimmedThrough) + 1
		if err := log.Read(ctx, info.Name, s.Shard, from, 0, func(e wal.Entry) error { return see(e.Record) }); err != nil {
			return 0, err
		}
	}
	return top + 1, nil
}
