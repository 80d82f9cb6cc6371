package walflight

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/wal"
)

// TestMain doubles as a WAL server process: with WALFLIGHT_SERVE_DIR set, the
// test binary serves that directory (the standard re-exec pattern), prints
// "ADDR <host:port>" on stdout and serves until SIGTERM.
func TestMain(m *testing.M) {
	if dir := os.Getenv("WALFLIGHT_SERVE_DIR"); dir != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		err := Serve(ctx, dir, "127.0.0.1:0", ServeOptions{
			Server: ServerOptions{Token: os.Getenv("WALFLIGHT_TOKEN")},
			Engine: wal.Options{MaxGenerationBytes: 64 << 10},
			OnListen: func(a net.Addr) {
				fmt.Printf("ADDR %s\n", a.String())
			},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serverProc is a WAL server running in a child process.
type serverProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	once sync.Once
}

func startServer(t *testing.T, dir, token string) *serverProc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "WALFLIGHT_SERVE_DIR="+dir, "WALFLIGHT_TOKEN="+token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, done: make(chan struct{})}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ADDR ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("server did not start: %q %v; stderr: %s", line, err, stderr.String())
	}
	p.addr = strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
	go func() { io.Copy(io.Discard, out); cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill SIGKILLs the server and waits for it to be gone.
func (p *serverProc) kill() {
	p.once.Do(func() { p.cmd.Process.Signal(syscall.SIGKILL) })
	<-p.done
}

func dial(t *testing.T, addr string, opts ClientOptions) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// makeRecord builds a deterministic record of n rows for id.
func makeRecord(id int64, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d of record %d", i, id))
	}
	return b.NewRecordBatch()
}

// ipcBytes is rec's Arrow IPC stream encoding, for byte comparisons.
func ipcBytes(t testing.TB, rec arrow.RecordBatch) []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(testSchema))
	r := array.NewRecordBatch(testSchema, rec.Columns(), rec.NumRows())
	defer r.Release()
	if err := w.Write(r); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.Bytes()
}
