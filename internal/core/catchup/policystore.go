package catchup

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/coord"
	"github.com/walctl/walctl/internal/core/errs"
)

// Policy-record errors; callers test them with errors.Is.
var (
	// ErrNoPolicy means no policy is stored yet: a master stores its own
	// on its first start.
	ErrNoPolicy = fmt.Errorf("no catch-up policy is stored yet (the first 'walctl master run' stores its own): %w", errs.ErrNotFound)
	// ErrPolicyChanged means the stored policy is not at the revision the
	// caller expected (someone changed it since it was read).
	ErrPolicyChanged = fmt.Errorf("the stored catch-up policy changed since it was read: %w", errs.ErrConflict)
)

// StoredPolicy is the persisted policy and the etcd ModRevision of its
// record, which a change compares against. JSON: {"policy", "revision"}.
type StoredPolicy struct {
	Policy   Policy `json:"policy"`
	Revision int64  `json:"revision"`
}

// LoadPolicy reads the stored policy: ErrNoPolicy when there is none,
// coord.ErrUnknownRecord for a record this binary does not know,
// errs.ErrUnavailable when etcd does not answer. It has no side effects.
func (s *Store) LoadPolicy(ctx context.Context) (StoredPolicy, error) {
	k := s.k.policy()
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.cli.Get(cctx, k)
	cancel()
	if err != nil {
		return StoredPolicy{}, unavailable(ctx, s.c, "read catch-up policy", err)
	}
	if len(resp.Kvs) == 0 {
		return StoredPolicy{}, fmt.Errorf("etcd key %s: %w", k, ErrNoPolicy)
	}
	var rec policyRecord
	if err := decodeKV(resp.Kvs[0], KindPolicy, &rec); err != nil {
		return StoredPolicy{}, err
	}
	if rec.OwnedTargets == nil {
		rec.OwnedTargets = []string{}
	}
	return StoredPolicy{Policy: rec.Policy, Revision: resp.Kvs[0].ModRevision}, nil
}

// PolicyChange is an operator's change of the stored policy.
type PolicyChange struct {
	// Policy is the complete new policy; it is normalized and validated
	// exactly as a master's configured policy is.
	Policy Policy
	// ExpectRevision, when non-zero, is the revision the operator read
	// (`catchup policy show`); another revision is ErrPolicyChanged.
	ExpectRevision int64
	Actor          string
	Reason         string
}

// PolicyChangeResult reports a change. JSON: {"before", "after", "fields",
// "revision", "audit_key"}.
type PolicyChangeResult struct {
	Before StoredPolicy `json:"before"`
	After  StoredPolicy `json:"after"`
	// Fields are the JSON names of the fields that changed (empty: none;
	// nothing was written).
	Fields   []string `json:"fields"`
	AuditKey string   `json:"audit_key"`
}

// policyAudit is the audit record of a policy change, in coord's audit
// directory and shape (kind "audit", action "set-catchup-policy").
type policyAudit struct {
	header
	coord.AuditRecord
	Fields         []string `json:"fields"`
	Before         Policy   `json:"before"`
	After          Policy   `json:"after"`
	BeforeRevision int64    `json:"before_revision"`
}

// SetPolicy replaces the stored policy, in one transaction guarded by the
// record's ModRevision (the one read here, and ch.ExpectRevision when set)
// that also writes an audit record. An invalid policy is errs.ErrInvalid
// naming the field; no stored policy is ErrNoPolicy; a changed one is
// ErrPolicyChanged, and nothing is written. A policy equal to the stored
// one writes nothing. Running masters keep the policy they started with
// and refuse admissions (ErrPolicyMismatch) until restarted with the new
// one. Ambiguity (errs.ErrUnavailable): LoadPolicy tells whether the change
// landed; the audit directory holds its record if it did.
func (s *Store) SetPolicy(ctx context.Context, ch PolicyChange) (PolicyChangeResult, error) {
	if strings.TrimSpace(ch.Actor) == "" {
		return PolicyChangeResult{}, fmt.Errorf("set catch-up policy: no actor named: %w", errs.ErrInvalid)
	}
	p, err := ch.Policy.Normalize()
	if err != nil {
		return PolicyChangeResult{}, err
	}
	cur, err := s.LoadPolicy(ctx)
	if err != nil {
		return PolicyChangeResult{}, err
	}
	if ch.ExpectRevision != 0 && ch.ExpectRevision != cur.Revision {
		return PolicyChangeResult{}, fmt.Errorf("etcd key %s is at revision %d, not the expected %d: %w",
			s.k.policy(), cur.Revision, ch.ExpectRevision, ErrPolicyChanged)
	}
	res := PolicyChangeResult{Before: cur, After: cur, Fields: p.Diff(cur.Policy)}
	if res.Fields == nil {
		res.Fields = []string{}
	}
	if len(res.Fields) == 0 {
		return res, nil
	}
	now := s.now()
	ak := s.k.auditDir() + now.Format("20060102T150405.000000000Z") + "-catchup-policy"
	audit := policyAudit{header: header{coord.KindAudit, coord.SchemaVersion},
		AuditRecord: coord.AuditRecord{Action: "set-catchup-policy", Actor: ch.Actor, Reason: ch.Reason, At: now},
		Fields:      res.Fields, Before: cur.Policy, After: p, BeforeRevision: cur.Revision}
	resp, err := s.txn(ctx, "set catch-up policy",
		[]clientv3.Cmp{revGuard(s.k.policy(), cur.Revision), clientv3.Compare(clientv3.CreateRevision(ak), "=", 0)},
		clientv3.OpPut(s.k.policy(), encode(KindPolicy, policyRecord{hdr(KindPolicy), p})),
		clientv3.OpPut(ak, encode(coord.KindAudit, audit)))
	if err != nil {
		return PolicyChangeResult{}, err
	}
	if !resp.Succeeded {
		return PolicyChangeResult{}, fmt.Errorf("etcd key %s changed after revision %d was read: %w", s.k.policy(), cur.Revision, ErrPolicyChanged)
	}
	res.After, res.AuditKey = StoredPolicy{Policy: p, Revision: resp.Header.Revision}, ak
	return res, nil
}
