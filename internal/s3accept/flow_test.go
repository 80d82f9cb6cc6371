package s3accept

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// quickstartResult is the part of `walctl quickstart --output json` the
// tests read.
type quickstartResult struct {
	Records   int64    `json:"records"`
	FirstID   int64    `json:"first_id"`
	LastID    int64    `json:"last_id"`
	Version   uint64   `json:"version"`
	TableRows int64    `json:"table_rows"`
	Verified  bool     `json:"verified"`
	NextSteps []string `json:"next_steps"`
}

// quickstart runs `walctl quickstart` on the bucket and checks it verified.
func (s *site) quickstart(dataDir, root string, records int) quickstartResult {
	s.t.Helper()
	r := s.run("quickstart", nil, "--data-dir", dataDir, "--lance-root", root, "--output", "json",
		"quickstart", "--records", strconv.Itoa(records))
	var q quickstartResult
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &q) != nil {
		s.t.Fatalf("quickstart on %s: %s", root, r)
	}
	if !q.Verified || q.Records != int64(records) || q.LastID-q.FirstID+1 != int64(records) {
		s.t.Fatalf("quickstart on %s: %+v", root, q)
	}
	for _, step := range q.NextSteps { // else they would read local tables
		if !strings.Contains(step, "--lance-root "+root) {
			s.t.Fatalf("quickstart on %s suggests %q", root, step)
		}
	}
	return q
}

func (s *site) oracle() *oracle.Oracle {
	return oracletest.MustFind(s.t).WithStorage(oracle.S3Options(s.srv.Endpoint, s3server.Region, s.srv.AccessKey, s.srv.SecretKey))
}

// idsAt reads the ids of the table at version v (0: latest) with the
// official reader straight from the bucket.
func idsAt(ctx context.Context, t *testing.T, o *oracle.Oracle, table string, v uint64) []int64 {
	t.Helper()
	d, err := o.Dump(ctx, table, oracle.DumpOptions{Version: v, Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := d.Int64s("id")
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func idRange(into map[int64]bool, first, last int64) map[int64]bool {
	for id := first; id <= last; id++ {
		into[id] = true
	}
	return into
}

func mustExactlyOnce(t *testing.T, what string, ids []int64, want map[int64]bool) {
	t.Helper()
	if err := exactlyonce.Check(ids, want).Err(); err != nil {
		t.Fatalf("%s (official reader): %v", what, err)
	}
}

// quickstart on a bucket publishes and verifies every record; the official
// reader opens the table straight from the bucket and reads every row and
// column (the same as walctl's reader) at the latest and at an earlier
// version; an official append is then read by walctl, and walctl appends
// after it — every id exactly once throughout.
func TestQuickstartOnS3AndTheOfficialReaderAndWriter(t *testing.T) {
	s := newSite(t, "flow-bucket")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o, dd, root := s.oracle(), s.dataDir(), s.srv.URL("lake")
	table := root + "/quickstart.lance"

	q1 := s.quickstart(dd, root, 4000)
	want := idRange(map[int64]bool{}, q1.FirstID, q1.LastID)
	mustExactlyOnce(t, "after the first quickstart", idsAt(ctx, t, o, table, 0), want)
	sameRowsAsWalctl(ctx, t, s, o, dd, root, table)

	q2 := s.quickstart(dd, root, 3000)
	if q2.Version <= q1.Version {
		t.Fatalf("second quickstart published version %d after %d", q2.Version, q1.Version)
	}
	mustExactlyOnce(t, "at the first quickstart's version", idsAt(ctx, t, o, table, q1.Version), want)
	want = idRange(want, q2.FirstID, q2.LastID)
	mustExactlyOnce(t, "after the second quickstart", idsAt(ctx, t, o, table, 0), want)

	const officialID = 9_000_001
	row := map[string]any{"id": officialID, "ts": 1_700_000_000_000, "body": "official", "embedding": make([]float32, 32)}
	if _, err := o.Append(ctx, table, []map[string]any{row}); err != nil {
		t.Fatalf("official append in the bucket: %v", err)
	}
	want[officialID] = true
	r := s.run("read", nil, "--data-dir", dd, "--lance-root", root, "--output", "json", "table", "read", "--table", "quickstart", "--count")
	var count struct {
		RowCount int `json:"row_count"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &count) != nil || count.RowCount != len(want) {
		t.Fatalf("walctl reading the officially appended table: %d rows, want %d: %s", count.RowCount, len(want), r)
	}

	q3 := s.quickstart(dd, root, 2000)
	if q3.FirstID <= officialID || q3.TableRows != int64(len(want))+2000 {
		t.Fatalf("walctl appending after the official append: %+v", q3)
	}
	want = idRange(want, q3.FirstID, q3.LastID)
	mustExactlyOnce(t, "after walctl appended after the official writer", idsAt(ctx, t, o, table, 0), want)
}
