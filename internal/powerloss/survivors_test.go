package powerloss

import (
	"context"
	"errors"
	"strings"

	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/wal"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/powerfs"
)

// checkSurvivors checks, on the restarted WAL server, what a power cut may
// not take back: the table is registered; every ACKed position above the
// trimmed point still holds the very batch it was ACKed with (ReadBack:
// none gone, none reissued to other content); no shard's trimmed point or
// the latest watermark went backwards since the last look; no shard is
// trimmed past the latest watermark (rule 9: the versions the WAL was
// trimmed against survive); and every Lance version passes the audit and
// is, number for number, what it was when last seen (History).
func (h *harness) checkSurvivors(loss *powerfs.Loss) {
	h.t.Helper()
	st, err := h.stats()
	if err != nil {
		h.fail(loss, "after the power cut the WAL does not answer for table %s: %v", table, err)
	}
	wm, err := h.watermarks()
	if err != nil {
		h.fail(loss, "after the power cut the table cannot be read: %v", err)
	}
	var problems []string
	trimmed := map[int]uint64{}
	maxPos := h.prod.led.MaxPos()
	for _, s := range st.Shards {
		trimmed[s.Shard] = s.TrimmedThrough
		switch {
		case s.LastPosition < maxPos[s.Shard]:
			h.fail(loss, "shard %d: position %d was ACKed, the WAL ends at %d after the power cut", s.Shard, maxPos[s.Shard], s.LastPosition)
		case s.TrimmedThrough > wm[s.Shard]:
			h.fail(loss, "shard %d: the WAL is trimmed through %d, the table's latest version has watermark %d: a version the WAL was trimmed against is gone",
				s.Shard, s.TrimmedThrough, wm[s.Shard])
		case s.TrimmedThrough < h.trimmed[s.Shard]:
			h.fail(loss, "shard %d: trimmed through %d after the power cut, %d before it", s.Shard, s.TrimmedThrough, h.trimmed[s.Shard])
		case wm[s.Shard] < h.wm[s.Shard]:
			h.fail(loss, "shard %d: the latest watermark is %d after the power cut, %d before it", s.Shard, wm[s.Shard], h.wm[s.Shard])
		}
		h.trimmed[s.Shard], h.wm[s.Shard] = s.TrimmedThrough, wm[s.Shard]
	}
	ctx, cancel := context.WithTimeout(h.ctx, callTimeout)
	defer cancel()
	acks := h.prod.led.Acks()
	problems = append(problems, exactlyonce.ReadBack(ctx, h.cli, table, acks, trimmed)...)
	vs, audit := h.auditVersions()
	problems = append(problems, audit...)
	if len(problems) > 0 {
		h.fail(loss, "after the power cut:\n  %s", strings.Join(problems, "\n  "))
	}
	readBack := 0
	for _, a := range acks {
		if a.Pos > trimmed[a.Shard] {
			readBack++
		}
	}
	h.t.Logf("  then: %d ACKed positions above the trimmed points %v read back, %d versions audited", readBack, trimmed, len(vs))
}

// auditVersions reads every version with the managed reader, audits them
// against the ledger and against what each held when last seen.
func (h *harness) auditVersions() ([]exactlyonce.Version, []string) {
	vs, err := exactlyonce.ReadVersions(h.ctx, h.lanceRoot(), table)
	if err != nil {
		return nil, []string{"managed reader: " + err.Error()}
	}
	return vs, append(h.prod.led.AuditVersions(vs), h.versions.Observe(vs, h.cleaned)...)
}

// stats asks the WAL server for the table's statistics, within callTimeout.
func (h *harness) stats() (wal.TableStats, error) {
	ctx, cancel := context.WithTimeout(h.ctx, callTimeout)
	defer cancel()
	return h.cli.Stats(ctx, table, nil)
}

// watermarks reads the latest version's watermarks (none before the first
// publication).
func (h *harness) watermarks() (publish.Watermarks, error) {
	r, err := publish.OpenReader(h.lanceRoot(), table, publish.Selection{})
	if errors.Is(err, lance.ErrDatasetNotFound) || errors.Is(err, lance.ErrVersionNotFound) {
		return publish.Watermarks{}, nil
	}
	if err != nil {
		return nil, err
	}
	return r.State.Watermarks, nil
}

// latestVersion is the table's latest version number (0 before the first).
func (h *harness) latestVersion() uint64 {
	ds, err := lance.Open(h.tablePath())
	if err != nil {
		return 0
	}
	v, err := ds.LatestVersion()
	if err != nil {
		return 0
	}
	return v
}
