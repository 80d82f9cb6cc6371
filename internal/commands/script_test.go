package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
	"github.com/walctl/walctl/internal/core/etcdembed"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"walctl": func() { os.Exit(Main()) },
	})
}

// TestScripts runs every testscripts/*.txtar against the real entry point.
// Custom commands:
//
//	etcd-start NAME   start a real embedded etcd, export its endpoint as $NAME
//	wait-file PATH    wait (up to 60 s) until PATH exists
//	sleep DURATION    wait DURATION (what a clean needs to find things old)
//	exitcode N CMD…   run CMD (like exec) and require exit status N
//	wait-entries T N  wait (up to 60 s) until table T's WAL holds at least N
//	                  entries over all shards (a producer is running)
//	wait-published T  wait (up to 60 s) until table T's WAL is fully published
//	                  and trimmed (every shard trimmed through its last position)
//	env-from-file NAME PATH   wait (up to 60 s) for PATH, export its trimmed
//	                  content as $NAME (e.g. the master's API URL)
//	arrow-fixture RULE PATH   write arrowchecktest's stream breaking RULE (or
//	                  "valid", or "schema" for its JSON schema) to PATH
//	http [-token=T|-notoken] METHOD URL [BODY]   one HTTP request; stdout gets
//	                  "HTTP <status>" and the body. BODY is a file, or pad:N for
//	                  a JSON object with an N-byte reason. The token defaults to
//	                  $WALCTL_MASTER_TOKEN.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("..", "..", "testscripts"),
		Setup: func(env *testscript.Env) error {
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			env.Setenv("XDG_DATA_HOME", filepath.Join(env.WorkDir, ".data"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"etcd-start": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: etcd-start ENVNAME")
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				srv, err := etcdembed.Start(ctx, etcdembed.Options{Dir: ts.MkAbs("etcd-" + args[0])})
				ts.Check(err)
				ts.Defer(srv.Close)
				ts.Setenv(args[0], srv.Endpoint())
			},
			"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exitcode N command [args...]")
				}
				want, err := strconv.Atoi(args[0])
				ts.Check(err)
				err = ts.Exec(args[1], args[2:]...)
				got := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					got = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("%s: %v", args[1], err)
				}
				if got != want {
					ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
				}
			},
			"wait-published": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: wait-published TABLE")
				}
				deadline := time.Now().Add(time.Minute)
				for {
					if ts.Exec("walctl", "wal", "stats", "--table", args[0], "--output", "json") == nil {
						if fullyTrimmed(ts.ReadFile("stdout")) {
							return
						}
					}
					if time.Now().After(deadline) {
						ts.Fatalf("wait-published %s: timed out", args[0])
					}
					time.Sleep(100 * time.Millisecond)
				}
			},
			"wait-entries": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: wait-entries TABLE N")
				}
				want, err := strconv.ParseUint(args[1], 10, 64)
				ts.Check(err)
				deadline := time.Now().Add(time.Minute)
				for {
					if ts.Exec("walctl", "wal", "stats", "--table", args[0], "--output", "json") == nil && entries(ts.ReadFile("stdout")) >= want {
						return
					}
					if time.Now().After(deadline) {
						ts.Fatalf("wait-entries %s %d: timed out", args[0], want)
					}
					time.Sleep(100 * time.Millisecond)
				}
			},
			"env-from-file": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: env-from-file NAME PATH")
				}
				deadline := time.Now().Add(time.Minute)
				for {
					if b, err := os.ReadFile(ts.MkAbs(args[1])); err == nil && len(b) > 0 {
						ts.Setenv(args[0], strings.TrimSpace(string(b)))
						return
					}
					if time.Now().After(deadline) {
						ts.Fatalf("env-from-file %s: timed out", args[1])
					}
					time.Sleep(50 * time.Millisecond)
				}
			},
			"sleep": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: sleep DURATION")
				}
				d, err := time.ParseDuration(args[0])
				ts.Check(err)
				time.Sleep(d)
			},
			"http":          scriptHTTP,
			"arrow-fixture": scriptArrowFixture,
			"wait-file": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: wait-file PATH")
				}
				deadline := time.Now().Add(time.Minute)
				for {
					_, err := os.Stat(ts.MkAbs(args[0]))
					if (err == nil) != neg {
						return
					}
					if time.Now().After(deadline) {
						ts.Fatalf("wait-file %s: timed out", args[0])
					}
					time.Sleep(50 * time.Millisecond)
				}
			},
		},
	})
}

// scriptArrowFixture is the `arrow-fixture` command of the scripts.
func scriptArrowFixture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: arrow-fixture RULE|valid|schema PATH")
	}
	var data []byte
	switch args[0] {
	case "valid":
		data = arrowchecktest.Valid()
	case "schema":
		data = []byte(arrowchecktest.SchemaJSON)
	default:
		for _, c := range arrowchecktest.Cases() {
			if c.Rule == args[0] {
				data = c.Stream
			}
		}
	}
	if data == nil {
		ts.Fatalf("arrow-fixture: no stream %q", args[0])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), data, 0o644))
}

// scriptHTTP is the `http` command of the scripts.
func scriptHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("http does not support !; check the status it prints")
	}
	token, send := ts.Getenv("WALCTL_MASTER_TOKEN"), true
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch {
		case args[0] == "-notoken":
			send = false
		case strings.HasPrefix(args[0], "-token="):
			token = strings.TrimPrefix(args[0], "-token=")
		default:
			ts.Fatalf("http: unknown option %s", args[0])
		}
		args = args[1:]
	}
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: http [-token=T|-notoken] METHOD URL [BODY]")
	}
	var body io.Reader
	if len(args) == 3 {
		if n, ok := strings.CutPrefix(args[2], "pad:"); ok {
			size, err := strconv.Atoi(n)
			ts.Check(err)
			body = strings.NewReader(`{"target": "orders", "reason": "` + strings.Repeat("x", size) + `"}`)
		} else {
			body = strings.NewReader(ts.ReadFile(args[2]))
		}
	}
	req, err := http.NewRequest(args[0], args[1], body)
	ts.Check(err)
	req.Header.Set("Content-Type", "application/json")
	if send {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "HTTP %d\n%s", resp.StatusCode, b)
}

// fullyTrimmed reports whether `wal stats --output json` shows every shard
// with entries trimmed through its last position.
func fullyTrimmed(statsJSON string) bool {
	var stats []struct {
		Shards []struct {
			LastPosition   uint64 `json:"last_position"`
			TrimmedThrough uint64 `json:"trimmed_through"`
		} `json:"shards"`
	}
	if json.Unmarshal([]byte(statsJSON), &stats) != nil || len(stats) != 1 {
		return false
	}
	for _, s := range stats[0].Shards {
		if s.TrimmedThrough != s.LastPosition {
			return false
		}
	}
	return true
}

// entries sums the last positions of every shard in `wal stats --output json`.
func entries(statsJSON string) uint64 {
	var stats []struct {
		Shards []struct {
			LastPosition uint64 `json:"last_position"`
		} `json:"shards"`
	}
	var n uint64
	if json.Unmarshal([]byte(statsJSON), &stats) == nil {
		for _, st := range stats {
			for _, s := range st.Shards {
				n += s.LastPosition
			}
		}
	}
	return n
}
