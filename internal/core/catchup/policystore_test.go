package catchup_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
)

// Issue 13 item 6: a master restarted with one more owned target refuses to
// start and says which command changes the stored policy; that command (a
// CAS on the record's revision, audited, validated like the master's
// configuration) lets the restarted master start.
func TestSetPolicyLetsAChangedMasterStart(t *testing.T) {
	e := newEnv(t, nil)
	more := e.policy
	more.OwnedTargets = append(slices.Clone(more.OwnedTargets), "t7")
	_, err := e.tryMaster(more)
	if !errors.Is(err, catchup.ErrPolicyMismatch) || !strings.Contains(err.Error(), "walctl catchup policy set") {
		t.Fatalf("restart with one more owned target: %v; want ErrPolicyMismatch naming 'walctl catchup policy set'", err)
	}

	cur, err := e.store.LoadPolicy(e.ctx)
	if err != nil || cur.Revision == 0 || cur.Policy.Owns("t7") {
		t.Fatalf("LoadPolicy = %+v, %v", cur, err)
	}
	bad := more
	bad.BackoffMin = 2 * bad.BackoffMax
	if _, err := e.store.SetPolicy(e.ctx, catchup.PolicyChange{Policy: bad, Actor: "test"}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("invalid policy: %v, want errs.ErrInvalid", err)
	}
	if _, err := e.store.SetPolicy(e.ctx, catchup.PolicyChange{Policy: more, ExpectRevision: cur.Revision + 1000, Actor: "test"}); !errors.Is(err, catchup.ErrPolicyChanged) || !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale expected revision: %v, want ErrPolicyChanged (errs.ErrConflict)", err)
	}
	if again, err := e.store.LoadPolicy(e.ctx); err != nil || again.Revision != cur.Revision {
		t.Fatalf("a refused change wrote: %+v, %v", again, err)
	}

	res, err := e.store.SetPolicy(e.ctx, catchup.PolicyChange{Policy: more, ExpectRevision: cur.Revision, Actor: "ops", Reason: "new table"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Fields, []string{"owned_targets"}) || res.After.Revision <= cur.Revision || !res.After.Policy.Owns("t7") || res.AuditKey == "" {
		t.Fatalf("result %+v", res)
	}
	resp, err := e.c.Etcd().Get(e.ctx, res.AuditKey)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("audit record %s: %v %v", res.AuditKey, resp, err)
	}
	var audit struct {
		Kind   string         `json:"kind"`
		Action string         `json:"action"`
		Actor  string         `json:"actor"`
		Reason string         `json:"reason"`
		Fields []string       `json:"fields"`
		Before catchup.Policy `json:"before"`
		After  catchup.Policy `json:"after"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &audit); err != nil || audit.Kind != coord.KindAudit || audit.Action != "set-catchup-policy" ||
		audit.Actor != "ops" || audit.Reason != "new table" || audit.Before.Owns("t7") || !audit.After.Owns("t7") {
		t.Fatalf("audit %s: %+v, %v", resp.Kvs[0].Value, audit, err)
	}
	// The same change again writes nothing; the old master's admissions
	// now fail closed; a master with the new policy starts.
	if same, err := e.store.SetPolicy(e.ctx, catchup.PolicyChange{Policy: more, Actor: "ops"}); err != nil || len(same.Fields) != 0 || same.After.Revision != res.After.Revision {
		t.Fatalf("no-op change: %+v, %v", same, err)
	}
	if _, err := e.m.Admit(e.ctx, catchup.Request{Target: "t1", Source: "api"}); !errors.Is(err, catchup.ErrPolicyMismatch) {
		t.Fatalf("admission on a master with the old policy: %v, want ErrPolicyMismatch", err)
	}
	if _, err := e.tryMaster(more); err != nil {
		t.Fatalf("master with the stored policy: %v", err)
	}
}

func TestLoadPolicyWithoutOne(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.c.Etcd().Delete(e.ctx, e.prefix+"/catchup/policy", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.LoadPolicy(e.ctx); !errors.Is(err, catchup.ErrNoPolicy) || !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("LoadPolicy with none stored: %v, want ErrNoPolicy", err)
	}
	if _, err := e.store.SetPolicy(e.ctx, catchup.PolicyChange{Policy: e.policy, Actor: "ops"}); !errors.Is(err, catchup.ErrNoPolicy) {
		t.Fatalf("SetPolicy with none stored: %v, want ErrNoPolicy", err)
	}
}
