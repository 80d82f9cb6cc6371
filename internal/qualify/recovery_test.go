package qualify

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/dustin/go-humanize"

	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/pubbench"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/core/walflight"
	"github.com/walctl/walctl/internal/testutil/exactlyonce"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// EnvBytes sets the backlog size of the qualification (default 64 MiB; the
// qualification run, `make qualify`, uses 192 MiB).
const EnvBytes = "WALCTL_QUALIFY_BYTES"

const table = "q"

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String},
	{Name: "vec", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)},
}, nil)

// record is what the test remembers of each ACKed record to check the
// payload with: its body's hash and its vector.
type record struct {
	body uint64
	vec  [4]float32
}

func bodyHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func qualifyBytes(t *testing.T) int64 {
	s := os.Getenv(EnvBytes)
	if s == "" {
		return 64 << 20
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", EnvBytes, s, err)
	}
	return int64(n)
}

func TestRecoveryAfterSIGKILLMidPublication(t *testing.T) {
	size := qualifyBytes(t)
	for _, streamed := range []bool{false, true} {
		name := map[bool]string{false: "buffered", true: "streamed"}[streamed]
		t.Run(name, func(t *testing.T) { qualifyRecovery(t, streamed, size) })
	}
}

func qualifyRecovery(t *testing.T, streamed bool, size int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	walDir, data, fp := filepath.Join(dir, "wal"), filepath.Join(dir, "worker"), filepath.Join(dir, "failpoints")
	if err := os.MkdirAll(fp, 0o755); err != nil {
		t.Fatal(err)
	}
	lanceRoot := filepath.Join(data, "tables")
	// etcd is the coordination service, not a WAL or worker process: it
	// keeps running (in this test process), so the dead worker's claim
	// lapses with its lease as it would in production.
	etcd, err := etcdembed.Start(ctx, etcdembed.Options{Dir: filepath.Join(dir, "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()

	procs := proc.NewRunner(walctlBin, dir)
	procs.WaitTimeout = 20 * time.Minute

	// 1. A WAL server process holds a backlog of ACKed, sealed, unpublished
	// entries.
	srv, addr := serveWAL(t, procs, walDir, "wal-1")
	want := map[int64]record{}
	var mu sync.Mutex
	cli, err := walflight.Dial(ctx, addr, walflight.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bl, err := pubbench.MakeBacklog(ctx, cli, pubbench.BacklogOptions{
		Table: table, Shards: 4, Bytes: size, EntryBytes: 1 << 20, Schema: schema, StringBytes: 1000,
		OnAck: func(b arrow.RecordBatch) {
			ids, bodies, vecs := b.Column(0).(*array.Int64), b.Column(1).(*array.String), b.Column(2).(*array.FixedSizeList)
			vals := vecs.ListValues().(*array.Float32)
			mu.Lock()
			defer mu.Unlock()
			for i := 0; i < ids.Len(); i++ {
				r := record{body: bodyHash(bodies.Value(i))}
				start, _ := vecs.ValueOffsets(i)
				for k := range r.vec {
					r.vec[k] = vals.Value(int(start) + k)
				}
				if _, dup := want[ids.Value(i)]; dup {
					t.Errorf("id %d produced twice", ids.Value(i))
				}
				want[ids.Value(i)] = r
			}
		},
	})
	cli.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backlog: %d entries, %d records, %s", bl.Entries, bl.Rows, humanize.IBytes(uint64(bl.Bytes)))

	// 2. A worker publishes it, a quarter per plan, and is stopped before the
	// link of version 4 — after its first data commit, mid-publication.
	env := func(walAddr string, extra ...string) []string {
		return append([]string{
			"WALCTL_DATA_DIR=" + data, "WALCTL_ETCD_ENDPOINTS=" + etcd.Endpoint(), "WALCTL_WAL=" + walAddr,
			"WALCTL_CLAIM_TTL=3s", "WALCTL_LOG_LEVEL=info",
			"WALCTL_PUBLICATION_MAX_BYTES=" + strconv.FormatInt(size/4, 10),
			"WALCTL_PUBLICATION_FILE_BYTES=" + strconv.FormatInt(size/16, 10),
			"WALCTL_WORKER_MEMORY_BUDGET=" + strconv.FormatInt(256<<20, 10),
			"WALCTL_WORKER_PUBLICATION_PIPELINE_PREPARATION=" + strconv.FormatBool(streamed),
		}, extra...)
	}
	worker := procs.Start(t, "worker", env(addr, "WALCTL_FAILPOINTS=before-manifest-link=pause@4", "WALCTL_FAILPOINT_DIR="+fp),
		"worker", "run", "--tables", table)
	worker.WaitFile(filepath.Join(fp, "before-manifest-link.paused"))

	// 3. SIGKILL every WAL and worker process.
	worker.Kill()
	srv.Kill()
	before := rows(t, lanceRoot)
	if before >= bl.Rows {
		t.Fatalf("killed after everything was published (%d of %d rows): not mid-publication", before, bl.Rows)
	}
	t.Logf("killed mid-publication with %d of %d records published", before, bl.Rows)

	// 4. Reopen the original directories; one publication completes. The
	// dead worker's claim lapses with its lease (3 s): until then publish
	// exits 4 (claimed).
	srv2, addr2 := serveWAL(t, procs, walDir, "wal-2")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := procs.Run(t, "publish", env(addr2), "publish", "--table", table, "--all", "--output", "json")
		if out := r.Stdout; r.Code == 0 {
			// The killed worker's pinned plan is adopted and its recorded
			// files reused (they verify), then the rest is published.
			if !strings.Contains(out, `"outcome": "published"`) || !strings.Contains(out, `"adopted": true`) || !strings.Contains(out, `"reused": true`) {
				t.Fatalf("publish after restart did not adopt the prepared plan:\n%s", out)
			}
			break
		}
		if r.Code != 4 || time.Now().After(deadline) {
			t.Fatalf("publish after restart: %s", r)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// 5. Checks: the official reader sees the full payload exactly once,
	// the aggregate row count matches, walctl's read-only reader agrees,
	// walctl verify passes, and the WAL is trimmed through everything.
	checkOracle(ctx, t, filepath.Join(lanceRoot, table+".lance"), want)
	if n := rows(t, lanceRoot); n != bl.Rows {
		t.Fatalf("walctl's reader counts %d rows, %d were ACKed", n, bl.Rows)
	}
	r := procs.Run(t, "read", env(addr2), "table", "read", table, "--count", "--output", "json")
	if r.Code != 0 || !strings.Contains(r.Stdout, fmt.Sprintf(`"row_count": %d`, bl.Rows)) {
		t.Fatalf("table read --count: %s", r)
	}
	r = procs.Run(t, "verify", env(addr2), "verify", "--table", table, "--output", "json")
	if r.Code != 0 || !strings.Contains(r.Stdout, `"ok": true`) {
		t.Fatalf("verify: %s", r)
	}
	checkTrimmed(ctx, t, addr2)

	// 6. Negative controls: verify fails on altered copies of the table.
	negativeControls(ctx, t, procs, lanceRoot, env(addr2))
	if r := srv2.Terminate(time.Minute); r.Code != 0 {
		t.Fatalf("wal serve after SIGTERM: %s", r)
	}
}

// serveWAL starts `walctl wal serve` on walDir and returns it and its address.
func serveWAL(t *testing.T, procs *proc.Runner, walDir, name string) (*proc.Proc, string) {
	t.Helper()
	addrFile := filepath.Join(procs.Dir, name+".addr")
	p := procs.Start(t, name, []string{"WALCTL_DATA_DIR=" + filepath.Join(procs.Dir, "srv")},
		"wal", "serve", "--dir", walDir, "--listen", "127.0.0.1:0", "--addr-file", addrFile)
	return p, p.WaitFile(addrFile)
}

// rows counts the latest version's rows with walctl's managed reader (0
// when the table does not exist yet).
func rows(t *testing.T, lanceRoot string) int64 {
	t.Helper()
	r, err := publish.OpenReader(lanceRoot, table, publish.Selection{})
	if err != nil {
		if os.IsNotExist(err) || strings.Contains(err.Error(), "not found") {
			return 0
		}
		t.Fatal(err)
	}
	var n int64
	for _, f := range r.Manifest.Fragments {
		n += int64(f.PhysicalRows)
	}
	return n
}

func checkTrimmed(ctx context.Context, t *testing.T, addr string) {
	t.Helper()
	cli, err := walflight.Dial(ctx, addr, walflight.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := cli.Stats(ctx, table, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Shards {
		if s.TrimmedThrough != s.LastPosition || s.LastPosition == 0 {
			t.Fatalf("shard %d trimmed through %d of %d", s.Shard, s.TrimmedThrough, s.LastPosition)
		}
	}
}

// checkOracle reads the whole table with the official LanceDB reader and
// checks every ACKed record is there exactly once with its payload.
func checkOracle(ctx context.Context, t *testing.T, root string, want map[int64]record) {
	t.Helper()
	o, err := oracle.Find()
	if err != nil {
		t.Fatal(err)
	}
	d, err := o.Dump(ctx, root, oracle.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.CountRows != len(want) || d.NumRows != len(want) {
		t.Fatalf("official reader: %d rows (count %d), %d ACKed", d.NumRows, d.CountRows, len(want))
	}
	ids, bodies, vecs := d.Columns["id"], d.Columns["body"], d.Columns["vec"]
	if len(ids) != len(want) || len(bodies) != len(want) || len(vecs) != len(want) {
		t.Fatalf("official reader: columns of %d/%d/%d values", len(ids), len(bodies), len(vecs))
	}
	parsed, err := d.Int64s("id")
	if err != nil {
		t.Fatal(err)
	}
	if err := exactlyonce.Check(parsed, want).Err(); err != nil {
		t.Fatalf("official reader: %v", err)
	}
	for i, id := range parsed {
		var body string
		var vec []float64
		if err := json.Unmarshal(bodies[i], &body); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(vecs[i], &vec); err != nil {
			t.Fatal(err)
		}
		w := want[id]
		switch {
		case bodyHash(body) != w.body:
			t.Fatalf("official reader: id %d body differs", id)
		case len(vec) != 4:
			t.Fatalf("official reader: id %d vec %v", id, vec)
		}
		for k := range vec {
			if float32(vec[k]) != w.vec[k] {
				t.Fatalf("official reader: id %d vec[%d] = %v, want %v", id, k, vec[k], w.vec[k])
			}
		}
	}
}
