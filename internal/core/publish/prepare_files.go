package publish

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
)

// DefaultStreamFiles and DefaultBufferedFiles are how many files of a plan
// streamed and buffered preparation write at once when Config.StreamFiles
// or Config.BufferedFiles is not set.
const (
	DefaultStreamFiles   = 4
	DefaultBufferedFiles = 2
)

// writeFile writes one admitted file of a plan. Its admission reserved held
// bytes of the budget. It calls written exactly once, with the bytes it
// then holds, as soon as it needs neither them nor its slot: once the
// file's bytes are all written, before the fsync that makes them durable
// (which waits for the disk, not for CPU or memory), or on failure. It
// returns only after the file is closed, or removed.
type writeFile func(ctx context.Context, j fileJob, held int64, written func(held int64)) (lance.Descriptor, error)

// prepareFiles writes the plan's files, at most files at once, each with
// write. A writer is admitted only once need(j) bytes are reserved for it
// (its encoder workspace, and in buffered mode its entries), so an admitted
// writer can always finish and free the budget. A writer frees its slot
// and its bytes before its file's fsync, so the next file is being written
// while the disk completes the last.
//
// The first failure (a file, ctx, the claim) cancels the others: no new
// writer is admitted, and the error is returned only after every admitted
// writer finished — its fetch returned, its entries released, its file
// closed or removed and its reservations released.
func (s *Session) prepareFiles(ctx context.Context, plan *Plan, jobs []fileJob, files int, need func(fileJob) int64, write writeFile) ([]lance.Descriptor, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // losing the claim stops every writer of the plan
		select {
		case <-s.claim.Done():
			cancel()
		case <-sctx.Done():
		}
	}()

	run := &fileRun{descs: make([]lance.Descriptor, len(jobs)), freed: make(chan struct{}, len(jobs)), cancel: cancel}
	var wg sync.WaitGroup
	slots := semaphore.NewWeighted(int64(files))
	hooks := s.p.cfg.hooks
	for _, j := range jobs {
		if err := slots.Acquire(sctx, 1); err != nil {
			run.fail(err)
			break
		}
		n := need(j)
		if err := s.admit(sctx, n, run); err != nil {
			slots.Release(1)
			run.fail(err)
			break
		}
		if hooks != nil && hooks.writerStart != nil {
			hooks.writerStart(j.index)
		}
		wg.Add(1)
		go func(j fileJob) {
			defer wg.Done()
			desc, err := write(sctx, j, n, func(held int64) {
				if hooks != nil && hooks.writerFreed != nil {
					hooks.writerFreed(j.index)
				}
				s.p.cfg.Budget.Release(held)
				slots.Release(1)
				run.freeOne()
			})
			if err == nil {
				err = failpoint.Inject(sctx, failpoint.AfterFilesPrepared, run.written(j, desc))
			}
			if err != nil {
				run.fail(fileErr(plan, j, err))
			}
			if hooks != nil && hooks.writerDone != nil {
				hooks.writerDone(j.index, err)
			}
		}(j)
	}
	wg.Wait()
	return run.result(ctx, s.claim.Err)
}

// fileRun is the shared state of one prepareFiles call: the descriptors
// written so far, the first failure, and the writers still holding their
// reservation.
type fileRun struct {
	mu       sync.Mutex
	first    error
	descs    []lance.Descriptor
	finished int
	active   int // admitted writers still holding their reservation
	freed    chan struct{}
	cancel   context.CancelFunc
}

// fail records err (a real failure wins over a cancellation it caused) and
// stops the other writers.
func (r *fileRun) fail(err error) {
	r.mu.Lock()
	if r.first == nil || (errors.Is(r.first, context.Canceled) && !errors.Is(err, context.Canceled)) {
		r.first = err
	}
	r.mu.Unlock()
	r.cancel()
}

// freeOne notes that an admitted writer gave back its reservation.
func (r *fileRun) freeOne() {
	r.mu.Lock()
	r.active--
	r.mu.Unlock()
	r.freed <- struct{}{}
}

// written records j's descriptor and returns how many files are done.
func (r *fileRun) written(j fileJob, desc lance.Descriptor) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.descs[j.index] = desc
	r.finished++
	return r.finished
}

// result is the descriptors once every writer finished, or the first
// failure; a claim lost meanwhile is reported as itself, not as the
// cancellation it caused.
func (r *fileRun) result(ctx context.Context, claimErr func() error) ([]lance.Descriptor, error) {
	first := r.first
	if first == nil {
		first = claimErr() // a claim lost after the last file was admitted
	}
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		if err := claimErr(); err != nil && errors.Is(first, context.Canceled) {
			return nil, err
		}
		return nil, first
	}
	return r.descs, nil
}

// admit reserves n bytes for a new writer. While writers of this plan hold
// reservations it takes the bytes only when they are free now, and
// otherwise waits for one of those writers to free its own: a writer
// admitted into bytes the running writers need would stall them. With none
// holding any it waits for the bytes.
func (s *Session) admit(ctx context.Context, n int64, run *fileRun) error {
	b := s.p.cfg.Budget
	for {
		if b.TryReserve(n) {
			break
		}
		run.mu.Lock()
		k := run.active
		run.mu.Unlock()
		if k == 0 {
			if err := b.Reserve(ctx, n, "Lance file writer"); err != nil {
				return err
			}
			break
		}
		select {
		case <-run.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	run.mu.Lock()
	run.active++
	run.mu.Unlock()
	return nil
}

// finishFile finishes w's bytes, then calls free with what w still holds
// until Close — its store writer's buffers: on S3 the parts not uploaded
// yet. free releases the rest of the writer's reservation and its slot
// (the encoder workspace is no longer needed) and returns how much it kept
// back (at most its reservation). finishFile then closes w, which syncs (or
// uploads) it, and only then releases what was kept. A file that cannot be
// finished is removed.
func (s *Session) finishFile(w *lance.FileWriter, j fileJob, free func(keep int64) int64) (lance.Descriptor, error) {
	if err := w.Finish(); err != nil {
		_ = w.Abort()
		return lance.Descriptor{}, err
	}
	kept := free(int64(w.StoreBufferBytes()))
	defer s.p.cfg.Budget.Release(kept)
	if h := s.p.cfg.hooks; h != nil && h.closing != nil {
		h.closing(j.index)
	}
	return w.Close()
}
