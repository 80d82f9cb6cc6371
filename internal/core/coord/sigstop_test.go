package coord

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const childHolderEnv = "COORD_TEST_CHILD_HOLDER" // endpoint,prefix,table

// runChildHolder is the body of a child test process that acquires a claim
// (TTL 2s) and reports "held <revision>"; after "go" on stdin it tries to
// act as the holder and reports what the claim says.
func runChildHolder(spec string) {
	parts := strings.Split(spec, ",")
	ctx := context.Background()
	c, err := Connect(ctx, Config{Endpoints: []string{parts[0]}, Prefix: parts[1], ClaimTTL: 2 * time.Second})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	cl, err := c.Acquire(ctx, parts[2], worker("stopped-child"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("held", cl.CreateRevision())
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	fmt.Printf("valid: %v\n", cl.Valid(ctx))
	fmt.Printf("setepoch: %v\n", cl.SetEpoch(ctx, 99))
	// Were it blind to its own clock, etcd's guard still refuses it.
	cl.hooks.skipLocalCheck.Store(true)
	fmt.Printf("guarded setepoch: %v\n", cl.SetEpoch(ctx, 99))
	os.Exit(0)
}

// The seed's abandoned-claim scenario with a real process: the holder is
// SIGSTOPped; a successor gets the table only after etcd really expires the
// lease; the holder, resumed, is refused.
func TestStoppedHolderProcess(t *testing.T) {
	prefix := testPrefix(t)
	c := newClient(t, prefix, Config{})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childHolderEnv+"="+strings.Join([]string{srv.Endpoint(), prefix, "t"}, ","))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	out := bufio.NewScanner(stdout)
	if !out.Scan() || !strings.HasPrefix(out.Text(), "held ") {
		t.Fatalf("child: %q", out.Text())
	}
	oldRev, _ := strconv.ParseInt(strings.TrimPrefix(out.Text(), "held "), 10, 64)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	info, err := c.Get(testCtx(t), "t")
	if err != nil || info.CreateRevision != oldRev {
		t.Fatalf("stopped child's claim: %+v %v", info, err)
	}
	expiredBefore := scrape(t).MustSum(t, "etcd_debugging_server_lease_expired_total")

	succ, attempts := takeover(t, c, "t", oldRev)
	took := time.Since(stopped)
	// The child renews every TTL/3, so its last renewal is at most TTL/3
	// before the stop: etcd cannot expire the lease sooner than 2/3 TTL
	// after it.
	if took < 2*info.LeaseTTL/3 {
		t.Fatalf("successor acquired %s after the stop, TTL %s", took, info.LeaseTTL)
	}
	if attempts < 2 {
		t.Fatalf("only %d attempts: the refusal before expiry was not exercised", attempts)
	}
	if d := scrape(t).MustSum(t, "etcd_debugging_server_lease_expired_total") - expiredBefore; d < 1 {
		t.Fatalf("etcd expired %v leases: takeover without a real expiry", d)
	}

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "go")
	for _, want := range []string{"valid: ", "setepoch: ", "guarded setepoch: "} {
		if !out.Scan() || !strings.HasPrefix(out.Text(), want) || strings.HasSuffix(out.Text(), "<nil>") ||
			!strings.Contains(out.Text(), "fenced") {
			t.Fatalf("resumed holder: %q, want a fenced refusal", out.Text())
		}
		t.Logf("resumed holder: %s", out.Text())
	}
	now, err := c.Get(testCtx(t), "t")
	if err != nil || now.CreateRevision != succ.CreateRevision() || now.Epoch != 0 {
		t.Fatalf("successor's claim after the old holder resumed: %+v %v", now, err)
	}
	t.Logf("takeover %s after SIGSTOP (TTL %s), %d attempts refused", took.Round(time.Millisecond), info.LeaseTTL, attempts-1)
}
