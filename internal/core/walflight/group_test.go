package walflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// fakeReplica is a control-flow fake of one replica of a group: all replicas
// share one real engine; only the one whose index is in leader accepts
// mutations, the others refuse with a NotLeaderError (pre-proposal).
// hangAppend makes the leader keep an append it received without answering
// (a leader that lost its quorum mid-call).
type fakeReplica struct {
	wal.Log
	idx        int32
	leader     *atomic.Int32
	appends    *atomic.Int64 // appends that reached any leader
	linearized *atomic.Int64 // linearizable reads a leader passed
	hangAppend *atomic.Bool
}

// LinearizableRead passes on the leader only, as a raft barrier would.
func (f *fakeReplica) LinearizableRead(context.Context) error {
	if err := f.notLeader(); err != nil {
		return err
	}
	f.linearized.Add(1)
	return nil
}

func (f *fakeReplica) notLeader() error {
	if f.leader.Load() == f.idx {
		return nil
	}
	return &NotLeaderError{LeaderID: "r" + string(rune('0'+f.leader.Load()))}
}

func (f *fakeReplica) Append(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (uint64, error) {
	if err := f.notLeader(); err != nil {
		return 0, err
	}
	f.appends.Add(1)
	if f.hangAppend.Load() {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return f.Log.Append(ctx, table, shard, rec)
}

func (f *fakeReplica) CreateTable(ctx context.Context, name string, s *arrow.Schema, shards int) (wal.TableInfo, error) {
	if err := f.notLeader(); err != nil {
		return wal.TableInfo{}, err
	}
	return f.Log.CreateTable(ctx, name, s, shards)
}

type fakeGroup struct {
	addrs      []string
	leader     atomic.Int32
	appends    atomic.Int64
	linearized atomic.Int64
	hangAppend atomic.Bool
}

// startFakeGroup serves n fake replicas over one engine on loopback.
func startFakeGroup(t *testing.T, n int) *fakeGroup {
	t.Helper()
	eng, err := wal.Open(t.TempDir(), wal.Options{QuickOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	g := &fakeGroup{}
	for i := 0; i < n; i++ {
		r := &fakeReplica{Log: eng, idx: int32(i), leader: &g.leader, appends: &g.appends, linearized: &g.linearized, hangAppend: &g.hangAppend}
		srv, err := NewServer(r, ServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(lis)
		t.Cleanup(func() { srv.grpc.Stop() })
		g.addrs = append(g.addrs, lis.Addr().String())
	}
	return g
}

// tableClient is a group client of g (closed when the test ends) that has
// created table t with one shard.
func tableClient(t *testing.T, g *fakeGroup, timeout time.Duration) *GroupClient {
	t.Helper()
	c, err := NewGroupClient("g1", g.addrs, ClientOptions{CallTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.CreateTable(context.Background(), "t", testSchema, 1); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGroupClientFollowsTheLeader(t *testing.T) {
	g := startFakeGroup(t, 3)
	g.leader.Store(2)
	c := tableClient(t, g, 10*time.Second)
	ctx := context.Background()
	for i := 1; i <= 6; i++ {
		if i == 4 {
			g.leader.Store(0) // an election moved the leader
		}
		rec := makeRecord(int64(i), 2)
		pos, err := c.Append(ctx, "t", 0, rec)
		rec.Release()
		if err != nil || pos != uint64(i) {
			t.Fatalf("append %d = %d, %v; want position %d", i, pos, err, i)
		}
	}
	if got := g.appends.Load(); got != 6 {
		t.Fatalf("appends that reached a leader = %d, want 6 (a refusal by a follower is never an append)", got)
	}
	var seen []uint64
	err := c.Read(ctx, "t", 0, 1, 6, func(e wal.Entry) error { seen = append(seen, e.Position); return nil })
	if err != nil || len(seen) != 6 || seen[0] != 1 || seen[5] != 6 {
		t.Fatalf("read = %v, %v", seen, err)
	}
}

// Reads that say what exists (table, generations, epoch, stats, a read to
// the last position) are linearizable: a follower, which may lag the
// group, refuses them and the leader serves them. A read of an explicit
// range and a direct call to one replica are served where they land.
func TestGroupClientStateReadsAreLinearizable(t *testing.T) {
	g := startFakeGroup(t, 3)
	g.leader.Store(2)
	c := tableClient(t, g, 10*time.Second)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		rec := makeRecord(int64(i), 2)
		_, err := c.Append(ctx, "t", 0, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	g.leader.Store(0) // an election the client has not heard of
	reads := map[string]func() error{
		"table":       func() error { _, err := c.Table(ctx, "t"); return err },
		"tables":      func() error { _, err := c.Tables(ctx); return err },
		"generations": func() error { _, err := c.Generations(ctx, "t", 0); return err },
		"epoch":       func() error { _, err := c.Epoch(ctx, "t"); return err },
		"stats":       func() error { _, err := c.Stats(ctx, "t", nil); return err },
		"read to the end": func() error {
			n := 0
			err := c.Read(ctx, "t", 0, 1, 0, func(wal.Entry) error { n++; return nil })
			if err == nil && n != 3 {
				return fmt.Errorf("read %d entries, want 3", n)
			}
			return err
		},
	}
	for name, read := range reads {
		before := g.linearized.Load()
		if err := read(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := g.linearized.Load() - before; got != 1 {
			t.Fatalf("%s: passed %d linearizable reads on the leader, want 1", name, got)
		}
	}
	before := g.linearized.Load()
	if err := c.Read(ctx, "t", 0, 1, 3, func(wal.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	follower := dial(t, g.addrs[1], ClientOptions{CallTimeout: 10 * time.Second})
	if _, err := follower.Generations(ctx, "t", 0); err != nil {
		t.Fatalf("a direct read of one follower: %v", err)
	}
	if got := g.linearized.Load() - before; got != 0 {
		t.Fatalf("an explicit range and a direct read asked for %d linearizable reads, want 0", got)
	}
}

// An append the leader received and never answered is reported to the
// producer as unknown, and sent to no other member: no duplicate.
func TestGroupClientNeverRetriesAnAmbiguousAppend(t *testing.T) {
	g := startFakeGroup(t, 3)
	g.leader.Store(1)
	c := tableClient(t, g, 2*time.Second)
	ctx := context.Background()
	g.hangAppend.Store(true)
	rec := makeRecord(1, 1)
	defer rec.Release()
	_, err := c.Append(ctx, "t", 0, rec)
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("append to a leader that never answers: %v; want ErrOutcomeUnknown", err)
	}
	if !strings.Contains(err.Error(), "outcome unknown") || !strings.Contains(err.Error(), g.addrs[1]) {
		t.Errorf("the error should say the outcome is unknown and name the member: %v", err)
	}
	if got := g.appends.Load(); got != 1 {
		t.Fatalf("the append reached a leader %d times; want exactly 1 (never retried)", got)
	}
}

// A group none of whose members answers fails within the call timeout,
// naming every member tried.
func TestGroupClientNoQuorumNamesTheMembersTried(t *testing.T) {
	var addrs []string
	for i := 0; i < 3; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, lis.Addr().String())
		lis.Close() // nothing listens there any more
	}
	c, err := NewGroupClient("g9", addrs, ClientOptions{CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := makeRecord(1, 1)
	defer rec.Release()
	_, err = c.Append(context.Background(), "t", 0, rec)
	if !errors.Is(err, errs.ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("append to a dead group: %v; want ErrUnavailable (nothing was sent, so not unknown)", err)
	}
	for _, a := range append(addrs, "g9", "--command-timeout") {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("error does not name %s: %v", a, err)
		}
	}
}

func TestParseGroups(t *testing.T) {
	g, err := ParseGroups("g1=a:1,b:2,c:3; g2=d:4")
	if err != nil || len(g) != 2 || len(g["g1"]) != 3 || g["g2"][0] != "d:4" {
		t.Fatalf("ParseGroups = %v, %v", g, err)
	}
	if g.String() != "g1=a:1,b:2,c:3;g2=d:4" {
		t.Errorf("String = %q", g.String())
	}
	if _, err := g.Members("g3"); !errors.Is(err, ErrUnknownGroup) || !errors.Is(err, errs.ErrInvalid) ||
		!strings.Contains(err.Error(), `"g3"`) || !strings.Contains(err.Error(), "g1, g2") {
		t.Errorf("unknown group: %v", err)
	}
	for _, bad := range []string{"g1", "g1=a", "g1=a:1;g1=b:2", "g 1=a:1", "g1=a:1,a:1", "g1="} {
		if _, err := ParseGroups(bad); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("ParseGroups(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

type mapPlacement map[string]string

func (m mapPlacement) Group(_ context.Context, table string) (string, error) {
	if g, ok := m[table]; ok {
		return g, nil
	}
	return "", errs.ErrNotFound
}

func TestRouterSendsEachTableToItsGroup(t *testing.T) {
	g1, g2 := startFakeGroup(t, 3), startFakeGroup(t, 3)
	r := NewRouter(Groups{"g1": g1.addrs, "g2": g2.addrs}, mapPlacement{"a": "g1", "b": "g2", "lost": "g7"}, ClientOptions{CallTimeout: 5 * time.Second})
	defer r.Close()
	ctx := context.Background()
	for _, tbl := range []string{"a", "b"} {
		if _, err := r.CreateTable(ctx, tbl, testSchema, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Table(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	rec := makeRecord(1, 1)
	defer rec.Release()
	if _, err := r.Append(ctx, "a", 0, rec); err != nil {
		t.Fatal(err)
	}
	if g1.appends.Load() != 1 || g2.appends.Load() != 0 {
		t.Fatalf("appends to a: g1 %d, g2 %d; want 1, 0", g1.appends.Load(), g2.appends.Load())
	}
	if _, err := r.Append(ctx, "lost", 0, rec); !errors.Is(err, ErrUnknownGroup) || !strings.Contains(err.Error(), `"g7"`) {
		t.Fatalf("a table placed in an unconfigured group: %v; want ErrUnknownGroup naming g7", err)
	}
	if _, err := r.Append(ctx, "nowhere", 0, rec); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("a table without placement: %v; want ErrNotFound", err)
	}
	infos, err := r.Tables(ctx)
	if err != nil || len(infos) != 2 || infos[0].Name != "a" || infos[1].Name != "b" {
		t.Fatalf("Tables = %v, %v", infos, err)
	}
}
