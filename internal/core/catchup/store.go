package catchup

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/walctl/walctl/internal/core/coord"
)

// StoreOptions configure a Store.
type StoreOptions struct {
	// Clock stamps records (default the real clock).
	Clock clock.PassiveClock
	// CallTimeout bounds every etcd call (default coord.DefaultCallTimeout).
	CallTimeout time.Duration
	// Metrics, when set, counts admissions, stall verdicts, cancellations
	// and refused leader writes.
	Metrics *Metrics
}

// Store reads and writes the catch-up records of one coord prefix. It is
// what every party shares: the master (through Master and Controller), the
// executor (BeginExecution, CheckAdmission, RecordProgress, Heartbeat) and
// the CLI (Status, Stats). It is safe for concurrent use.
type Store struct {
	c           *coord.Client
	cli         *clientv3.Client
	k           keys
	clock       clock.PassiveClock
	callTimeout time.Duration
	hooks       hooks
	// term, when set, guards every write (Guarded); metrics count
	// decisions and refusals (nil: none).
	term    *Term
	metrics *Metrics
}

// hooks let tests act at the exact point of a race, never by timing.
type hooks struct {
	// beforeCancelCAS runs between a cancellation's observation and its
	// CAS, with the table.
	beforeCancelCAS func(table string)
}

// NewStore returns a Store on c's etcd client and key prefix.
func NewStore(c *coord.Client, opts StoreOptions) *Store {
	s := &Store{c: c, cli: c.Etcd(), k: keys{c}, clock: opts.Clock, callTimeout: opts.CallTimeout, metrics: opts.Metrics}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.callTimeout <= 0 {
		s.callTimeout = coord.DefaultCallTimeout
	}
	return s
}

func (s *Store) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.callTimeout)
}

func (s *Store) now() time.Time { return utc(s.clock.Now()) }

// tableView is one table's records read at one etcd revision.
type tableView struct {
	table     string
	rev       int64
	target    targetRecord
	targetRev int64 // ModRevision, 0 when absent
	adm       *admissionRecord
	admRev    int64
	stats     *TableStats
	statsRev  int64
	claim     *coord.Owner
	claimRev  int64 // CreateRevision, 0 when unclaimed
	resv      *coord.Reservation
	hb        *heartbeatRecord
	policy    *Policy
	policyRev int64
	slots     map[int]slotRecord
}

// claimedByPeer reports whether a claim exists that is not the current
// Job's executor (a worker, a CLI command, or a stale executor).
func (v tableView) claimedByPeer() bool {
	if v.claim == nil {
		return false
	}
	return !(v.claim.Kind == coord.OwnerCatchup && v.target.Phase.Active() && v.claim.JobID == v.target.JobID)
}

// view reads every record of table, plus the policy and (withSlots) every
// slot, in one linearizable transaction. Unknown records fail closed.
func (s *Store) view(ctx context.Context, table string, withSlots bool) (tableView, error) {
	if err := coord.ValidateTable(table); err != nil {
		return tableView{}, err
	}
	ops := []clientv3.Op{
		clientv3.OpGet(s.k.target(table)),
		clientv3.OpGet(s.k.admission(table)),
		clientv3.OpGet(s.k.stats(table)),
		clientv3.OpGet(s.k.claim(table)),
		clientv3.OpGet(s.k.reservation(table)),
		clientv3.OpGet(s.k.heartbeat(table)),
		clientv3.OpGet(s.k.policy()),
	}
	if withSlots {
		ops = append(ops, clientv3.OpGet(s.k.slotsDir(), clientv3.WithPrefix()))
	}
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.cli.Txn(cctx).Then(ops...).Commit()
	cancel()
	if err != nil {
		return tableView{}, unavailable(ctx, s.c, "read catch-up records of table "+table, err)
	}
	return s.decodeView(table, resp, withSlots)
}

// decodeView decodes view's transaction response, failing closed on any
// record this binary does not know.
func (s *Store) decodeView(table string, resp *clientv3.TxnResponse, withSlots bool) (tableView, error) {
	one := func(i int) *mvccpb.KeyValue {
		if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
			return kvs[0]
		}
		return nil
	}
	v := tableView{table: table, rev: resp.Header.Revision,
		target: targetRecord{header: hdr(KindTarget), Table: table, Phase: PhaseIdle, Slot: -1}}
	if kv := one(0); kv != nil {
		if err := decodeKV(kv, KindTarget, &v.target); err != nil {
			return v, err
		}
		v.targetRev = kv.ModRevision
	}
	if kv := one(1); kv != nil {
		var a admissionRecord
		if err := decodeKV(kv, KindAdmission, &a); err != nil {
			return v, err
		}
		v.adm, v.admRev = &a, kv.ModRevision
	}
	if kv := one(2); kv != nil {
		var st statsRecord
		if err := decodeKV(kv, KindStats, &st); err != nil {
			return v, err
		}
		v.stats, v.statsRev = &st.TableStats, kv.ModRevision
	}
	if kv := one(3); kv != nil {
		o, err := claimOwner(kv)
		if err != nil {
			return v, err
		}
		v.claim, v.claimRev = &o, kv.CreateRevision
	}
	if kv := one(4); kv != nil {
		r, err := decodeReservation(kv)
		if err != nil {
			return v, err
		}
		v.resv = &r
	}
	if kv := one(5); kv != nil {
		var hb heartbeatRecord
		if err := decodeKV(kv, KindHeartbeat, &hb); err != nil {
			return v, err
		}
		v.hb = &hb
	}
	if kv := one(6); kv != nil {
		var p policyRecord
		if err := decodeKV(kv, KindPolicy, &p); err != nil {
			return v, err
		}
		if p.OwnedTargets == nil {
			p.OwnedTargets = []string{}
		}
		v.policy, v.policyRev = &p.Policy, kv.ModRevision
	}
	if withSlots {
		v.slots = map[int]slotRecord{}
		for _, kv := range resp.Responses[7].GetResponseRange().Kvs {
			n, ok := slotIndex(s.k.slotsDir(), string(kv.Key))
			if !ok {
				return v, fmt.Errorf("etcd key %s: not a slot: %w", kv.Key, coord.ErrUnknownRecord)
			}
			var sr slotRecord
			if err := decodeKV(kv, KindSlot, &sr); err != nil {
				return v, err
			}
			v.slots[n] = sr
		}
	}
	return v, nil
}

// revGuard compares a key's ModRevision with one read earlier (0: absent).
func revGuard(key string, rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(key), "=", rev)
}

func slotValue(n int, table, jobID string) string {
	return encode(KindSlot, slotRecord{hdr(KindSlot), n, table, jobID})
}

func reservationValue(table, jobID string) string {
	b, err := coord.MarshalReservation(coord.Reservation{Table: table, JobID: jobID})
	if err != nil {
		panic(fmt.Sprintf("catchup: encoding reservation: %v", err))
	}
	return string(b)
}
