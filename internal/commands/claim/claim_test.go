package claim

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
)

type fakeCoord struct {
	claims  []coord.ClaimInfo
	audit   []coord.AuditEntry
	revoked coord.RevokeRequest
	err     error
}

func (c *fakeCoord) Get(_ context.Context, table string) (coord.ClaimInfo, error) {
	for _, ci := range c.claims {
		if ci.Table == table {
			return ci, nil
		}
	}
	return coord.ClaimInfo{}, coord.ErrNoClaim
}
func (c *fakeCoord) List(context.Context) ([]coord.ClaimInfo, error) { return c.claims, c.err }
func (c *fakeCoord) Revoke(_ context.Context, req coord.RevokeRequest) (coord.RevokeResult, error) {
	c.revoked = req
	if c.err != nil {
		return coord.RevokeResult{}, c.err
	}
	return coord.RevokeResult{Claim: c.claims[0], AuditKey: "/audit/1-" + req.Table}, nil
}
func (c *fakeCoord) Audit(_ context.Context, table string) ([]coord.AuditEntry, error) {
	var out []coord.AuditEntry
	for _, a := range c.audit {
		if table == "" || a.Table == table {
			out = append(out, a)
		}
	}
	return out, c.err
}

// fakeDeps captures what a verb prints.
func fakeDeps(co *fakeCoord, printed *any) deps {
	return deps{
		Coord: func(context.Context) (Coord, error) { return co, nil },
		Print: func(v any, _ func() *render.Table) error { *printed = v; return nil },
	}
}

// The table is --table everywhere; the positional form is a hidden alias.
func TestTableFlagAndAlias(t *testing.T) {
	for _, args := range [][]string{{"--table", "orders"}, {"orders"}, {"orders", "--table", "orders"}} {
		o, _, err := cmdtest.Parse(t, NewCmdRevoke, args)
		if err != nil || o.Table != "orders" {
			t.Fatalf("%v: %+v %v", args, o, err)
		}
	}
	for _, args := range [][]string{nil, {"a", "--table", "b"}, {"a", "b"}} {
		if _, _, err := cmdtest.Parse(t, NewCmdRevoke, args); !cmdutil.IsFlagError(err) {
			t.Fatalf("%v: %v, want a usage error", args, err)
		}
	}
	if o, _, err := cmdtest.Parse(t, NewCmdInspect, nil); err != nil || o.Table != "" {
		t.Fatalf("inspect without a table: %v", err)
	}
}

func TestInspectRun(t *testing.T) {
	co := &fakeCoord{claims: []coord.ClaimInfo{{Table: "a"}, {Table: "b"}}}
	var printed any
	opts := &InspectOptions{deps: fakeDeps(co, &printed), Now: time.Now}
	if err := inspectRun(context.Background(), opts); err != nil || len(printed.([]coord.ClaimInfo)) != 2 {
		t.Fatalf("all: %v %v", printed, err)
	}
	opts.Table = "b"
	if err := inspectRun(context.Background(), opts); err != nil || printed.([]coord.ClaimInfo)[0].Table != "b" {
		t.Fatalf("one: %v %v", printed, err)
	}
	opts.Table = "c"
	if err := inspectRun(context.Background(), opts); !errors.Is(err, coord.ErrNoClaim) {
		t.Fatalf("unclaimed: %v", err)
	}
}

func TestRevokeRun(t *testing.T) {
	co := &fakeCoord{claims: []coord.ClaimInfo{{Table: "a", Epoch: 3}}}
	var printed any
	var errOut bytes.Buffer
	opts := &RevokeOptions{deps: fakeDeps(co, &printed), ErrOut: &errOut, Actor: "alice", Table: "a", ExpectRevision: 7, Reason: "stuck"}
	if err := revokeRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if co.revoked != (coord.RevokeRequest{Table: "a", ExpectCreateRevision: 7, Reason: "stuck", Actor: "alice"}) ||
		printed.(coord.RevokeResult).AuditKey == "" || !strings.Contains(errOut.String(), "advances the epoch past 3") {
		t.Fatalf("request %+v printed %+v stderr %q", co.revoked, printed, errOut.String())
	}
	co.err = coord.ErrClaimChanged
	if err := revokeRun(context.Background(), opts); !errors.Is(err, coord.ErrClaimChanged) {
		t.Fatalf("changed claim: %v", err)
	}
}

func TestHistoryRun(t *testing.T) {
	co := &fakeCoord{audit: []coord.AuditEntry{
		{Key: "1", AuditRecord: coord.AuditRecord{Table: "a"}},
		{Key: "2", AuditRecord: coord.AuditRecord{Table: "b"}},
		{Key: "3", AuditRecord: coord.AuditRecord{Table: "a"}},
	}}
	var printed any
	opts := &HistoryOptions{deps: fakeDeps(co, &printed), Table: "a", Limit: 1}
	if err := historyRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if got := printed.([]coord.AuditEntry); len(got) != 1 || got[0].Key != "3" {
		t.Fatalf("newest record of a: %+v", got)
	}
	co.err = errs.ErrUnavailable
	if err := historyRun(context.Background(), opts); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("etcd down: %v", err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdHistory, []string{"--limit", "-1"}); !cmdutil.IsFlagError(err) {
		t.Fatalf("negative limit: %v", err)
	}
}
