package wal

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/commands/cmdtest"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/render"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/walflight"
)

// fakeAdmin records membership calls over a fixed member list.
type fakeAdmin struct {
	members []walflight.Member
	calls   []string
}

func (a *fakeAdmin) Members(context.Context) ([]walflight.Member, error) { return a.members, nil }
func (a *fakeAdmin) AddReplica(_ context.Context, id, peer string) error {
	a.calls = append(a.calls, "add "+id+"@"+peer)
	return nil
}
func (a *fakeAdmin) RemoveReplica(_ context.Context, id string) error {
	a.calls = append(a.calls, "remove "+id)
	return nil
}
func (a *fakeAdmin) TransferLeader(_ context.Context, id string) error {
	a.calls = append(a.calls, "transfer "+id)
	return nil
}

func fakeMemberDeps(a *fakeAdmin, printed *any) memberDeps {
	return memberDeps{
		deps: deps{Print: func(v any, _ func() *render.Table) error { *printed = v; return nil }},
		Admin: func(g string) (groupAdmin, error) {
			if g != "g1" {
				return nil, walflight.ErrUnknownGroup
			}
			return a, nil
		},
		Group: "g1",
	}
}

func TestMembershipRuns(t *testing.T) {
	a := &fakeAdmin{members: []walflight.Member{
		{ID: "a-1", Name: "a", Voter: true, Leader: true}, {ID: "b-1", Name: "b", Voter: true},
		{ID: "c-1", Name: "c", Voter: true}, {ID: "c-2", Name: "c"}}}
	var printed any
	d := fakeMemberDeps(a, &printed)
	ctx := context.Background()
	if err := membersRun(ctx, &MembersOptions{d}); err != nil || len(printed.([]walflight.Member)) != 4 {
		t.Fatalf("members: %v %v", err, printed)
	}
	if err := addReplicaRun(ctx, &AddReplicaOptions{memberDeps: d, Peer: "h:1"}); err != nil {
		t.Fatal(err)
	}
	if err := removeReplicaRun(ctx, &RemoveReplicaOptions{memberDeps: d, Name: "c"}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("remove by a name two replicas share: %v; want exit 2 asking for --id", err)
	}
	if err := removeReplicaRun(ctx, &RemoveReplicaOptions{memberDeps: d, Name: "zz"}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("remove an unknown name: %v; want exit 3", err)
	}
	if err := removeReplicaRun(ctx, &RemoveReplicaOptions{memberDeps: d, ID: "c-1"}); err != nil {
		t.Fatal(err)
	}
	if err := transferLeaderRun(ctx, &TransferLeaderOptions{memberDeps: d, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"add @h:1", "remove c-1", "transfer b-1"}
	if len(a.calls) != len(want) {
		t.Fatalf("calls %v, want %v", a.calls, want)
	}
	for i := range want {
		if a.calls[i] != want[i] {
			t.Fatalf("calls %v, want %v", a.calls, want)
		}
	}
	d.Group = "g9"
	if err := membersRun(ctx, &MembersOptions{d}); !errors.Is(err, walflight.ErrUnknownGroup) || !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("unknown group: %v", err)
	}
}

func TestMembershipFlags(t *testing.T) {
	if _, _, err := cmdtest.Parse(t, NewCmdMembers, nil); !cmdutil.IsFlagError(err) {
		t.Errorf("members without --group: %v", err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdAddReplica, []string{"--group", "g1", "--peer", "nohost"}); !cmdutil.IsFlagError(err) {
		t.Errorf("add-replica with a bad --peer: %v", err)
	}
	if o, _, err := cmdtest.Parse(t, NewCmdAddReplica, []string{"--group", "g1", "--peer", "h:7171"}); err != nil || o.Peer != "h:7171" || o.Group != "g1" {
		t.Errorf("add-replica: %+v %v", o, err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdRemoveReplica, []string{"--group", "g1"}); !cmdutil.IsFlagError(err) {
		t.Errorf("remove-replica without --name or --id: %v", err)
	}
	if _, _, err := cmdtest.Parse(t, NewCmdTransferLeader, []string{"--group", "g1", "--name", "a", "--id", "b"}); !cmdutil.IsFlagError(err) {
		t.Errorf("transfer-leader with --name and --id: %v", err)
	}
}

func TestServeReplicatedFlags(t *testing.T) {
	o, _, err := cmdtest.Parse(t, NewCmdServe, []string{"--dir", "d", "--group", "g1", "--name", "a", "--peer-listen", "127.0.0.1:7171", "--bootstrap"})
	if err != nil || o.Replica == nil || o.Replica.Group != "g1" || o.Replica.Name != "a" || !o.Replica.Bootstrap || o.Replica.PeerListen != "127.0.0.1:7171" {
		t.Fatalf("replicated serve: %+v %v", o, err)
	}
	if o, _, err := cmdtest.Parse(t, NewCmdServe, []string{"--dir", "d"}); err != nil || o.Replica != nil {
		t.Fatalf("single-directory serve: %+v %v", o, err)
	}
	for _, args := range [][]string{
		{"--bootstrap"},
		{"--group", "g1", "--name", "a"},
		{"--group", "g1", "--name", "a", "--peer-listen", "nope"},
		{"--group", "g1", "--name", "a", "--peer-listen", "h:1", "--peer-tls-cert", "c"},
	} {
		if _, _, err := cmdtest.Parse(t, NewCmdServe, args); !cmdutil.IsFlagError(err) {
			t.Errorf("serve %v: %v, want a usage error", args, err)
		}
	}
	o, _, err = cmdtest.Parse(t, NewCmdServe, []string{"--group", "g1", "--name", "a", "--peer-listen", "h:1",
		"--peer-tls-cert", "/no/such.crt", "--peer-tls-key", "k", "--peer-tls-ca", "ca"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Replica.config(o); !errors.Is(err, errs.ErrInvalid) || !contains(err.Error(), "/no/such.crt") {
		t.Fatalf("a missing certificate: %v; want exit 2 naming the file", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
