package epoch

import (
	"context"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/wal"
)

type fakeWAL struct{ wal.Log }

func (fakeWAL) Tables(context.Context) ([]wal.TableInfo, error) {
	return []wal.TableInfo{{Name: "a"}, {Name: "b"}}, nil
}
func (fakeWAL) Epoch(_ context.Context, table string) (uint64, error) { return 3, nil }

type fakeClaims struct{}

func (fakeClaims) Get(_ context.Context, table string) (coord.ClaimInfo, error) {
	if table == "a" {
		return coord.ClaimInfo{Table: "a", Epoch: 3, Owner: coord.Owner{ID: "w"}}, nil
	}
	return coord.ClaimInfo{}, coord.ErrNoClaim
}

// Every table's three epochs and a verdict; no Lance table yet is no fence.
func TestShowRun(t *testing.T) {
	var printed any
	opts := &ShowOptions{LanceRoot: t.TempDir(),
		WAL:         func(context.Context) (wal.Log, error) { return fakeWAL{}, nil },
		Claims:      func(context.Context) (Claims, error) { return fakeClaims{}, nil },
		CallContext: func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) },
		Print:       func(v any, _ func() *render.Table) error { printed = v; return nil }}
	if err := showRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	rows := printed.([]Row)
	if len(rows) != 2 || *rows[0].ClaimEpoch != 3 || rows[0].FenceEpoch != nil || rows[1].ClaimEpoch != nil ||
		!strings.Contains(rows[0].Verdict, "advanced the epoch to 3 and has not fenced") || !strings.HasPrefix(rows[1].Verdict, "unclaimed") {
		t.Fatalf("%+v", rows)
	}
}

func TestVerdict(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		wal          uint64
		claim, fence *uint64
		ok           bool
		want         string
	}{
		{2, u(2), u(2), true, "held and fenced"},
		{2, nil, u(3), false, "above the WAL epoch"},
		{3, u(2), u(2), true, "a newer publisher exists"},
		{2, u(3), u(2), false, "inconsistent"},
	} {
		v, ok := verdict(tc.wal, tc.claim, tc.fence)
		if ok != tc.ok || !strings.Contains(v, tc.want) {
			t.Errorf("%+v: %q %v", tc, v, ok)
		}
	}
}
