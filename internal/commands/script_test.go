package commands

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

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
//	exitcode N CMD…   run CMD (like exec) and require exit status N
//	wait-published T  wait (up to 60 s) until table T's WAL is fully published
//	                  and trimmed (every shard trimmed through its last position)
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
