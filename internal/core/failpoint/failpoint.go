// Package failpoint names the points of the publication path where tests
// inject faults into a real process: return an error, SIGKILL the process,
// or pause it until told to resume. Points are compiled in but off: with no
// failpoint enabled, Inject is one atomic load.
//
// A process enables them from the environment:
//
//	WALCTL_FAILPOINTS="before-manifest-link=pause;after-files-prepared=kill@2"
//	WALCTL_FAILPOINT_DIR=/tmp/fp   # where pause writes NAME.paused and waits for NAME.resume
//
// An action is error, kill, pause or panic, optionally followed by @ARG (fire
// only when the point's argument equals ARG, e.g. the number of files
// prepared) and *N (fire at most N times).
package failpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Names of the points in the publication path.
const (
	// AfterWALEpochCheck: the publisher has checked the WAL epoch (the early
	// abort) and is about to commit.
	AfterWALEpochCheck = "after-wal-epoch-check"
	// AfterEpochAdvance: the WAL epoch was advanced by CAS; the fence commit
	// has not been made yet.
	AfterEpochAdvance = "after-epoch-advance"
	// BeforeManifestLink: the manifest of version N+1 is written and synced
	// under a temporary name, not yet linked. The argument is N+1: fences and
	// data commits both pass here, so @N+1 picks one commit.
	BeforeManifestLink = "before-manifest-link"
	// AfterLinkBeforeDirSync: version N+1 is linked, its directory not yet
	// synced. An error here makes the commit's outcome unknown. The argument
	// is N+1, as for BeforeManifestLink.
	AfterLinkBeforeDirSync = "after-link-before-dir-sync"
	// AfterCommitBeforeTrim: the commit is durable, the WAL not yet trimmed.
	AfterCommitBeforeTrim = "after-commit-before-trim"
	// AfterTrim: the WAL is trimmed up to the published watermarks.
	AfterTrim = "after-trim"
	// AfterPlanPin: a new plan is pinned (recorded durably), not yet
	// prepared.
	AfterPlanPin = "after-plan-pin"
	// AfterFilesPrepared: the argument is the number of files written so far.
	AfterFilesPrepared = "after-files-prepared"
	// AfterDescriptorRecord: the descriptor set is recorded.
	AfterDescriptorRecord = "after-descriptor-record"
	// BeforeControllerWrite: a catch-up leader has checked its term locally
	// and is about to send a write guarded by its election key.
	BeforeControllerWrite = "before-controller-write"
	// S3AfterPart: an S3 writer has collected the answer to part N of its
	// multipart upload (the argument is N); the upload is not completed
	// yet. A writer or a store killed here leaves the upload open.
	S3AfterPart = "s3-after-part"
)

// ErrInjected is returned by an "error" action.
var ErrInjected = errors.New("failpoint: injected error")

// EnvSpec and EnvDir are the environment variables read by FromEnv.
const (
	EnvSpec = "WALCTL_FAILPOINTS"
	EnvDir  = "WALCTL_FAILPOINT_DIR"
)

type action struct {
	kind   string
	arg    int
	hasArg bool
	left   int // remaining firings; -1 = unlimited
}

var (
	enabled atomic.Bool
	mu      sync.Mutex
	points  = map[string]*action{}
	dir     string
)

// FromEnv enables the failpoints named in WALCTL_FAILPOINTS.
func FromEnv() error {
	spec := os.Getenv(EnvSpec)
	if spec == "" {
		return nil
	}
	return Enable(spec, os.Getenv(EnvDir))
}

// Enable parses spec ("name=action[@arg][*n];…") and enables those points.
// pauseDir is where pause actions meet the test.
func Enable(spec, pauseDir string) error {
	mu.Lock()
	defer mu.Unlock()
	for _, item := range strings.Split(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, act, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("failpoint %q: want name=action", item)
		}
		a := &action{left: -1}
		if k, n, ok := strings.Cut(act, "*"); ok {
			v, err := strconv.Atoi(n)
			if err != nil {
				return fmt.Errorf("failpoint %q: bad count: %v", item, err)
			}
			act, a.left = k, v
		}
		if k, n, ok := strings.Cut(act, "@"); ok {
			v, err := strconv.Atoi(n)
			if err != nil {
				return fmt.Errorf("failpoint %q: bad argument: %v", item, err)
			}
			act, a.arg, a.hasArg = k, v, true
		}
		switch act {
		case "error", "kill", "pause", "panic":
		default:
			return fmt.Errorf("failpoint %q: unknown action %q", item, act)
		}
		a.kind = act
		points[name] = a
	}
	dir = pauseDir
	enabled.Store(len(points) > 0)
	return nil
}

// Reset disables every failpoint.
func Reset() {
	mu.Lock()
	defer mu.Unlock()
	points = map[string]*action{}
	enabled.Store(false)
}

// Inject runs the action enabled at name, if any, for the point's argument
// arg. It returns ErrInjected for an error action, ctx's error if ctx ends
// during a pause, and nil otherwise (also after a pause is resumed).
func Inject(ctx context.Context, name string, arg int) error {
	if !enabled.Load() {
		return nil
	}
	mu.Lock()
	a := points[name]
	fire := a != nil && (!a.hasArg || a.arg == arg) && a.left != 0
	if fire && a.left > 0 {
		a.left--
	}
	pauseDir := dir
	mu.Unlock()
	if !fire {
		return nil
	}
	switch a.kind {
	case "error":
		return fmt.Errorf("%w at %s", ErrInjected, name)
	case "panic":
		panic("failpoint " + name)
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is delivered before this matters
	case "pause":
		return pause(ctx, pauseDir, name)
	}
	return nil
}

// pause announces itself with NAME.paused and waits for NAME.resume. It
// polls: failpoints are a test mechanism, not a code path of production.
func pause(ctx context.Context, pauseDir, name string) error {
	if pauseDir == "" {
		pauseDir = os.TempDir()
	}
	if err := os.WriteFile(filepath.Join(pauseDir, name+".paused"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	resume := filepath.Join(pauseDir, name+".resume")
	for {
		if _, err := os.Stat(resume); err == nil {
			_ = os.Remove(resume)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
