package catchup

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/wal"
)

// TableStats is one table's backlog as the scan saw it, stored in etcd and
// printed by `walctl backlog scan` (stable JSON).
type TableStats struct {
	Table              string        `json:"table"`
	PendingGenerations int           `json:"pending_generations"`
	PendingBytes       int64         `json:"pending_bytes"`
	OldestPendingAge   time.Duration `json:"oldest_pending_age_ns"`
	ObservedAt         time.Time     `json:"observed_at"`
	Shards             []ShardStats  `json:"shards"`
}

// ShardStats is one shard's backlog.
type ShardStats struct {
	Shard              int           `json:"shard"`
	Watermark          uint64        `json:"watermark"`
	LastPosition       uint64        `json:"last_position"`
	PendingGenerations int           `json:"pending_generations"`
	PendingBytes       int64         `json:"pending_bytes"`
	OldestPendingAge   time.Duration `json:"oldest_pending_age_ns"`
	// WatermarkBehindTrim: published data is missing (rule 9); planning
	// will fail loudly for this table.
	WatermarkBehindTrim bool `json:"watermark_behind_trim"`
	// Damage lists damaged or quarantined WAL ranges of the shard: its
	// publication cannot pass them (DESIGN.md §3 rule 18).
	Damage []wal.DamageReport `json:"damage,omitempty"`
}

// StatsSource is the part of wal.Log the scan needs (wal.Log satisfies it).
type StatsSource interface {
	Tables(ctx context.Context) ([]wal.TableInfo, error)
	Stats(ctx context.Context, table string, watermarks map[int]uint64) (wal.TableStats, error)
}

// The WAL engine and the Flight client both serve the scan.
var _ StatsSource = wal.Log(nil)

// WatermarkFunc returns a table's published watermarks (shard → position).
// watermarks.FromLance reads them from the tables' Lance manifests; it lives in a
// subpackage so that this package does not depend on the Lance code.
type WatermarkFunc func(ctx context.Context, table string) (map[int]uint64, error)

// Scanner is the backlog scan: per table, pending sealed generations,
// bytes and oldest age, written to etcd with the observation time.
type Scanner struct {
	s   *Store
	src StatsSource
	wm  WatermarkFunc
}

// NewScanner returns a scan over src's tables with wm's watermarks.
func NewScanner(s *Store, src StatsSource, wm WatermarkFunc) *Scanner {
	return &Scanner{s: s, src: src, wm: wm}
}

// Scan scans every table once, writes each table's statistics to etcd
// (last writer wins; the observation time says how fresh they are) and
// returns them ordered by table. A failing table does not stop the others:
// their errors are joined and returned with the tables that succeeded.
// Cancellation stops the scan; statistics already written stay.
func (sc *Scanner) Scan(ctx context.Context) ([]TableStats, error) {
	tables, err := sc.src.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("backlog scan: list tables: %w", err)
	}
	var out []TableStats
	var errList []error
	for _, t := range tables {
		st, err := sc.scanTable(ctx, t.Name)
		if err != nil {
			if ctx.Err() != nil {
				return out, err
			}
			errList = append(errList, fmt.Errorf("backlog scan of table %s: %w", t.Name, err))
			continue
		}
		out = append(out, st)
	}
	return out, errors.Join(errList...)
}

func (sc *Scanner) scanTable(ctx context.Context, table string) (TableStats, error) {
	wm, err := sc.wm(ctx, table)
	if err != nil {
		return TableStats{}, err
	}
	ws, err := sc.src.Stats(ctx, table, wm)
	if err != nil {
		return TableStats{}, err
	}
	st := TableStats{Table: table, ObservedAt: sc.s.now(), Shards: []ShardStats{}}
	for _, sh := range ws.Shards {
		st.Shards = append(st.Shards, ShardStats{
			Shard: sh.Shard, Watermark: sh.Watermark, LastPosition: sh.LastPosition,
			PendingGenerations: sh.PendingGenerations, PendingBytes: sh.PendingBytes,
			OldestPendingAge: sh.OldestPendingAge, WatermarkBehindTrim: sh.WatermarkBehindTrim, Damage: sh.Damage,
		})
		st.PendingGenerations += sh.PendingGenerations
		st.PendingBytes += sh.PendingBytes
		st.OldestPendingAge = max(st.OldestPendingAge, sh.OldestPendingAge)
	}
	if err := sc.s.putStats(ctx, st); err != nil {
		return TableStats{}, err
	}
	return st, nil
}

// putStats writes one table's statistics.
func (s *Store) putStats(ctx context.Context, st TableStats) error {
	_, err := s.txn(ctx, "write backlog statistics of table "+st.Table, nil,
		clientv3.OpPut(s.k.stats(st.Table), encode(KindStats, statsRecord{hdr(KindStats), st})))
	return err
}

// Stats returns table's latest statistics; ok is false when none exist.
func (s *Store) Stats(ctx context.Context, table string) (TableStats, bool, error) {
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.cli.Get(cctx, s.k.stats(table))
	cancel()
	if err != nil {
		return TableStats{}, false, unavailable(ctx, s.c, "read backlog statistics of table "+table, err)
	}
	if len(resp.Kvs) == 0 {
		return TableStats{}, false, nil
	}
	var r statsRecord
	if err := decodeKV(resp.Kvs[0], KindStats, &r); err != nil {
		return TableStats{}, false, err
	}
	return r.TableStats, true, nil
}
