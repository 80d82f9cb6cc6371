// Package catchuptest holds test doubles for package catchup: an
// in-memory Runner whose Jobs, Pods and failures a test controls.
package catchuptest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/walctl/walctl/internal/core/catchup"
)

// FakeRunner is an in-memory catchup.Runner. It enforces what the real
// runners promise: one Job per name (a repeated Create returns the
// existing one), termination only with the current UID and
// resourceVersion, Pods that stay non-terminal until the test says so. It
// is safe for concurrent use.
type FakeRunner struct {
	mu     sync.Mutex
	jobs   map[string]*fakeJob
	seq    int
	fail   map[string][]error
	calls  []string // "create NAME", "get NAME", "terminate NAME", "pods NAME"
	specs  []catchup.JobSpec
	uidSeq int
	// OnCreate, when set, runs (without the runner's lock) after a Create
	// has created its Job and before it returns: the window in which a
	// master may die or race.
	OnCreate func(name string)
}

type fakeJob struct {
	ref       catchup.JobRef
	state     catchup.JobState
	detail    string
	deleted   bool
	podsAlive bool
}

// NewFakeRunner returns an empty runner.
func NewFakeRunner() *FakeRunner {
	return &FakeRunner{jobs: map[string]*fakeJob{}, fail: map[string][]error{}}
}

// FailNext makes the next call of op ("create", "get", "terminate",
// "pods") fail with err. For "create-after" the Job is created and then
// err is returned (an ambiguous create).
func (f *FakeRunner) FailNext(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[op] = append(f.fail[op], err)
}

func (f *FakeRunner) takeFail(op string) error {
	if errs := f.fail[op]; len(errs) > 0 {
		f.fail[op] = errs[1:]
		return errs[0]
	}
	return nil
}

func (f *FakeRunner) bump(j *fakeJob) {
	f.seq++
	j.ref.ResourceVersion = strconv.Itoa(f.seq)
}

// Create implements catchup.Runner.
func (f *FakeRunner) Create(_ context.Context, spec catchup.JobSpec) (catchup.JobRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "create "+spec.Name)
	if err := f.takeFail("create"); err != nil {
		return catchup.JobRef{}, err
	}
	j, ok := f.jobs[spec.Name]
	if !ok || j.deleted && !j.podsAlive {
		f.uidSeq++
		j = &fakeJob{ref: catchup.JobRef{Name: spec.Name, UID: fmt.Sprintf("uid-%d", f.uidSeq)}, state: catchup.JobActive, podsAlive: true}
		f.bump(j)
		f.jobs[spec.Name] = j
		f.specs = append(f.specs, spec)
	}
	ref := j.ref
	err := f.takeFail("create-after")
	if hook := f.OnCreate; hook != nil {
		f.mu.Unlock()
		hook(spec.Name)
		f.mu.Lock()
	}
	if err != nil {
		return catchup.JobRef{}, err
	}
	return ref, nil
}

// Get implements catchup.Runner: by name, and by UID when ref has one.
func (f *FakeRunner) Get(_ context.Context, ref catchup.JobRef) (catchup.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "get "+ref.Name)
	if err := f.takeFail("get"); err != nil {
		return catchup.JobStatus{}, err
	}
	j, ok := f.jobs[ref.Name]
	if !ok || j.deleted || ref.UID != "" && j.ref.UID != ref.UID {
		return catchup.JobStatus{}, fmt.Errorf("job %s: %w", ref, catchup.ErrJobNotFound)
	}
	return catchup.JobStatus{Ref: j.ref, State: j.state, Detail: j.detail}, nil
}

// Terminate implements catchup.Runner.
func (f *FakeRunner) Terminate(_ context.Context, ref catchup.JobRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "terminate "+ref.Name)
	if err := f.takeFail("terminate"); err != nil {
		return err
	}
	j, ok := f.jobs[ref.Name]
	if !ok || j.deleted {
		return fmt.Errorf("job %s: %w", ref.Name, catchup.ErrJobNotFound)
	}
	if j.ref.UID != ref.UID || j.ref.ResourceVersion != ref.ResourceVersion {
		return fmt.Errorf("job %s is uid %s rv %s, not uid %s rv %s: %w", ref.Name, j.ref.UID,
			j.ref.ResourceVersion, ref.UID, ref.ResourceVersion, catchup.ErrJobPrecondition)
	}
	j.deleted = true // background propagation: Pods go later
	return nil
}

// PodsTerminal implements catchup.Runner.
func (f *FakeRunner) PodsTerminal(_ context.Context, ref catchup.JobRef) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "pods "+ref.Name)
	if err := f.takeFail("pods"); err != nil {
		return false, err
	}
	j, ok := f.jobs[ref.Name]
	if !ok || j.ref.UID != ref.UID {
		return true, nil
	}
	return !j.podsAlive, nil
}

// Finish ends a Job by itself (succeeded or failed); its Pods stay alive
// until PodsGone.
func (f *FakeRunner) Finish(name string, state catchup.JobState, detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[name]
	j.state, j.detail = state, detail
	f.bump(j)
}

// Touch changes a Job's resourceVersion (as status updates do).
func (f *FakeRunner) Touch(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bump(f.jobs[name])
}

// PodsGone makes every Pod of the Job terminal.
func (f *FakeRunner) PodsGone(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[name].podsAlive = false
}

// Jobs lists the names of Jobs ever created, sorted.
func (f *FakeRunner) Jobs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.jobs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Created is the number of distinct Job objects created.
func (f *FakeRunner) Created() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.uidSeq
}

// Deleted reports whether the Job was terminated.
func (f *FakeRunner) Deleted(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[name]
	return ok && j.deleted
}

// Calls returns a copy of the call log ("create NAME", "get NAME",
// "terminate NAME", "pods NAME").
func (f *FakeRunner) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// Specs returns the specs of the Jobs created, in order.
func (f *FakeRunner) Specs() []catchup.JobSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]catchup.JobSpec(nil), f.specs...)
}

// CountCalls counts recorded calls with the given prefix ("create ", …).
func (f *FakeRunner) CountCalls(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if len(c) >= len(prefix) && c[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

var _ catchup.Runner = (*FakeRunner)(nil)
