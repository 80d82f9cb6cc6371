package publish

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/objstore"
	"k8s.io/utils/clock"
)

// refusesFresh is a store that refuses the next n creates as existing
// although nothing is there, as versitygw does under contention.
type refusesFresh struct {
	objstore.Store
	n atomic.Int32
}

func (s *refusesFresh) PutIfAbsent(ctx context.Context, key string, data []byte, h *objstore.Hooks) error {
	if s.n.Add(-1) >= 0 {
		return fmt.Errorf("put %s: %w", key, objstore.ErrExists)
	}
	return s.Store.PutIfAbsent(ctx, key, data, h)
}

// Issue 31: a record under a key of its writer's own (a compaction's
// lineage) whose create is refused as existing is not taken as created: it
// is read back, created again if nothing is there, and refused if another
// record is there — a compaction never commits without its record.
func TestOwnRecordRefusedAsExisting(t *testing.T) {
	local := objstore.NewLocal(t.TempDir())
	st := &refusesFresh{Store: local}
	s := NewStoreOn(st)
	ctx := context.Background()

	st.n.Store(1) // one spurious refusal: created on the next attempt
	if err := s.createOwnRecord(clock.RealClock{}, "_walctl/compactions/a.json", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if got, err := local.Get(ctx, "_walctl/compactions/a.json"); err != nil || string(got) != "a" {
		t.Fatalf("record a: %q, %v", got, err)
	}
	st.n.Store(5) // refused every time: an error, not a silent success
	if err := s.createOwnRecord(clock.RealClock{}, "_walctl/compactions/b.json", []byte("b")); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("always refused: %v; want ErrUnavailable", err)
	}
	st.n.Store(0) // the same bytes already there (an answer lost): created
	if err := s.createOwnRecord(clock.RealClock{}, "_walctl/compactions/a.json", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.createOwnRecord(clock.RealClock{}, "_walctl/compactions/a.json", []byte("other")); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("another record under the key: %v; want ErrCorrupt", err)
	}
}
