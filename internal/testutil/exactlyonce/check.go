// Package exactlyonce is the one "every ACKed record exactly once" check of
// the tree: a log of the ids a producer had ACKed, a producer that appends
// synthetic batches with unique ids and logs them, the ids of a table as the
// official LanceDB reader sees them, and the comparison of the two.
//
// The fault harnesses (internal/chaos, internal/powerloss) judge strictly
// with the rest of it: a Ledger of every append's outcome (ACKed at a
// position, of unknown outcome, or refused: Uncertain) and Judge; an audit
// of every Lance version, not only the latest (AuditVersions, History);
// ReadBack of every ACKed WAL position after a crash; CrossCheck of versions
// with the official reader; and Faults, the tally in which a planned fault
// that never fired fails the run. Each check takes plain data, so that a
// test can plant a violation in it (planted_test.go).
package exactlyonce

import (
	"context"
	"fmt"
	"slices"

	"github.com/walctl/walctl/internal/core/lance/oracle"
)

// Report is the comparison of a table's ids with the ACKed ones.
type Report struct {
	Rows  int // ids in the table
	Acked int // ids ACKed
	// Missing are ACKed ids not in the table (lost), Duplicated ids that are
	// in it more than once, Unacked ids in it that were never ACKed; each
	// sorted.
	Missing, Duplicated, Unacked []int64
	// Times counts the rows of each duplicated id.
	Times map[int64]int
}

// Check compares a table's ids with the ACKed ids (the keys of acked).
func Check[V any](ids []int64, acked map[int64]V) Report {
	r := Report{Rows: len(ids), Acked: len(acked), Times: map[int64]int{}}
	seen := Count(ids)
	for id, n := range seen {
		if n != 1 {
			r.Duplicated = append(r.Duplicated, id)
			r.Times[id] = n
		}
		if _, ok := acked[id]; !ok {
			r.Unacked = append(r.Unacked, id)
		}
	}
	for id := range acked {
		if seen[id] == 0 {
			r.Missing = append(r.Missing, id)
		}
	}
	slices.Sort(r.Missing)
	slices.Sort(r.Duplicated)
	slices.Sort(r.Unacked)
	return r
}

// Count counts each id's rows.
func Count(ids []int64) map[int64]int {
	seen := make(map[int64]int, len(ids))
	for _, id := range ids {
		seen[id]++
	}
	return seen
}

// Err is nil when every ACKed id is there exactly once and nothing else is;
// otherwise it names the first id of each kind of violation.
func (r Report) Err() error {
	switch {
	case len(r.Duplicated) > 0:
		id := r.Duplicated[0]
		return fmt.Errorf("id %d appears %d times (%d ids duplicated; %d rows, %d ACKed)", id, r.Times[id], len(r.Duplicated), r.Rows, r.Acked)
	case len(r.Unacked) > 0:
		return fmt.Errorf("id %d was never ACKed (%d such ids)", r.Unacked[0], len(r.Unacked))
	case len(r.Missing) > 0:
		return fmt.Errorf("%d ACKed ids missing (have %d of %d), first %d", len(r.Missing), r.Acked-len(r.Missing), r.Acked, r.Missing[0])
	}
	return nil
}

// OracleIDs reads the id column of the latest version of the table at path
// (<root>/<name>.lance) with the official LanceDB reader, checking that its
// row count agrees with the ids scanned.
func OracleIDs(ctx context.Context, path string) ([]int64, error) {
	o, err := oracle.Find()
	if err != nil {
		return nil, err
	}
	return OracleIDsWith(ctx, o, path)
}

// OracleIDsWith is OracleIDs with a given oracle, e.g. one with storage
// options for a table in an S3 bucket (path s3://bucket/prefix/T.lance).
func OracleIDsWith(ctx context.Context, o *oracle.Oracle, path string) ([]int64, error) {
	return OracleIDsAt(ctx, o, path, 0)
}

// OracleIDsAt is OracleIDsWith at version v (0: the latest).
func OracleIDsAt(ctx context.Context, o *oracle.Oracle, path string, v uint64) ([]int64, error) {
	d, err := o.Dump(ctx, path, oracle.DumpOptions{Version: v, Columns: []string{"id"}})
	if err != nil {
		return nil, err
	}
	ids, err := d.Int64s("id")
	if err != nil {
		return nil, err
	}
	if d.CountRows != len(ids) {
		return nil, fmt.Errorf("official reader: count_rows %d, %d ids scanned", d.CountRows, len(ids))
	}
	return ids, nil
}
