package verify

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
)

// publish.All publishes everything sealed under one claim; IDs then finds
// every id exactly once, and reports a duplicated fragment's ids.
func TestAllThenIDs(t *testing.T) {
	e := newEnv(t)
	e.produce(0, 4, 25)
	e.produce(1, 2, 50)
	p := publish.New(e.log, e.co, publish.Config{LanceRoot: e.lance,
		Owner: coord.Owner{ID: "test", Kind: coord.OwnerCLI, Host: "h", PID: 1}, Limits: publish.Limits{FileBytes: 16 << 10}})
	var rounds int
	_, results, err := p.All(e.ctx, "t", func(*publish.Result) { rounds++ })
	if err != nil || rounds != len(results) || results[len(results)-1].Outcome != publish.OutcomeIdle {
		t.Fatalf("All: %v, %d rounds", err, rounds)
	}
	r, err := publish.OpenReader(e.lance, "t", publish.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := IDs(e.ctx, r, "id", 1, 200); err != nil || rows != 200 {
		t.Fatalf("IDs: %d rows, %v", rows, err)
	}
	if _, err := IDs(e.ctx, r, "id", 1, 201); !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), "id 201 appears 0 times") {
		t.Fatalf("a missing id: %v", err)
	}
	if _, err := IDs(e.ctx, r, "body", 1, 2); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("not an int64 column: %v", err)
	}

	root := filepath.Join(e.lance, "t.lance")
	ds, err := lance.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := publish.NewStore(root).AllAttempts()
	if err != nil || len(atts) == 0 {
		t.Fatal(atts, err)
	}
	dupFragment(t, e, ds, atts[0].Files)
	r, err = publish.OpenReader(e.lance, "t", publish.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := IDs(e.ctx, r, "id", 1, 200); !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), "appears 2 times") {
		t.Fatalf("a duplicated fragment: %v", err)
	}
}
