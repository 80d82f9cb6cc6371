package publish

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/semaphore"

	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance"
)

// DefaultStreamFiles is how many files of a plan streamed preparation
// writes at once when Config.StreamFiles is not set.
const DefaultStreamFiles = 4

// streamDepth bounds the decoded entries queued between a file's fetch and
// its writer (each also holds its bytes in the budget).
const streamDepth = 4

// streamed is one decoded WAL entry on its way to a file writer.
type streamed struct {
	rec arrow.RecordBatch
	n   int64 // bytes reserved in the budget
}

// prepareStreamed writes the plan's files concurrently, at most
// Config.StreamFiles at once: each admitted file has a writer fed by a
// bounded stream of decoded record batches, written as they arrive — the
// batches the WAL decoded, not a re-serialisation of them. A writer is
// admitted only once its encoder workspace is reserved, so an admitted
// writer can always drain its stream and free the budget it is fed from.
//
// The first failure (a file, ctx, the claim) cancels the others: no new
// writer is admitted, and the error is returned only after every admitted
// writer finished — its fetch returned, its stream drained, its file closed
// or removed and its reservations released.
func (s *Session) prepareStreamed(ctx context.Context, plan *Plan, schema *lance.Schema, fv lance.FileVersion, jobs []fileJob) ([]lance.Descriptor, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // losing the claim stops every writer of the plan
		select {
		case <-s.claim.Done():
			cancel()
		case <-sctx.Done():
		}
	}()

	var (
		mu       sync.Mutex
		first    error
		descs    = make([]lance.Descriptor, len(jobs))
		finished int
		active   int // admitted writers not yet finished
		wg       sync.WaitGroup
	)
	finishedCh := make(chan struct{}, len(jobs))
	fail := func(err error) {
		mu.Lock()
		if first == nil || (errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled)) {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	slots := semaphore.NewWeighted(int64(s.p.cfg.StreamFiles))
	hooks := s.p.cfg.hooks
	for _, j := range jobs {
		if err := slots.Acquire(sctx, 1); err != nil {
			fail(err)
			break
		}
		ws := int64(workspaceBound)
		if err := s.admit(sctx, ws, &mu, &active, finishedCh); err != nil {
			slots.Release(1)
			fail(err)
			break
		}
		if hooks != nil && hooks.writerStart != nil {
			hooks.writerStart(j.index)
		}
		wg.Add(1)
		go func(j fileJob) {
			defer wg.Done()
			desc, err := s.streamFile(sctx, schema, fv, j, ws, func(held int64) {
				s.p.cfg.Budget.Release(held)
				slots.Release(1)
				mu.Lock()
				active--
				mu.Unlock()
				finishedCh <- struct{}{}
			})
			if err == nil {
				mu.Lock()
				descs[j.index] = desc
				finished++
				n := finished
				mu.Unlock()
				err = failpoint.Inject(sctx, failpoint.AfterFilesPrepared, n)
			}
			if err != nil {
				fail(fileErr(plan, j, err))
			}
			if hooks != nil && hooks.writerDone != nil {
				hooks.writerDone(j.index, err)
			}
		}(j)
	}
	wg.Wait()
	if first == nil {
		first = s.claim.Err() // a claim lost after the last file was admitted
	}
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		if err := s.claim.Err(); err != nil && errors.Is(first, context.Canceled) {
			return nil, err
		}
		return nil, first
	}
	return descs, nil
}

// admit reserves a new writer's workspace. While writers of this plan are
// running it takes the bytes only when they are free now, and otherwise
// waits for one of those writers to finish: a writer admitted into bytes the
// running writers' entries need would stall them. With none running it
// waits for the bytes.
func (s *Session) admit(ctx context.Context, ws int64, mu *sync.Mutex, active *int, finished <-chan struct{}) error {
	b := s.p.cfg.Budget
	for {
		if b.TryReserve(ws) {
			break
		}
		mu.Lock()
		n := *active
		mu.Unlock()
		if n == 0 {
			if err := b.Reserve(ctx, ws, "Lance encoder workspace"); err != nil {
				return err
			}
			break
		}
		select {
		case <-finished:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	mu.Lock()
	*active++
	mu.Unlock()
	return nil
}

// streamFile writes one file from a bounded stream fed by its own fetch and
// returns its descriptor. It calls written exactly once, with the workspace
// bytes it holds in the budget (ws, or more if the encoder outgrew it), as
// soon as the writer needs neither them nor its slot: once the file's bytes
// are all written, before the fsync that makes them durable (which waits
// for the disk, not the CPU or memory), or on failure. It returns only
// after the fetch returned, the stream is drained and the file is closed.
func (s *Session) streamFile(ctx context.Context, schema *lance.Schema, fv lance.FileVersion, j fileJob, ws int64, written func(held int64)) (lance.Descriptor, error) {
	b := s.p.cfg.Budget
	freed := false
	free := func() {
		if !freed {
			freed = true
			written(ws)
		}
	}
	defer free()
	w, err := s.ds.CreateFile(schema, lance.FileOptions{Name: j.name, Version: fv})
	if err != nil {
		return lance.Descriptor{}, err
	}
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	var held atomic.Int64 // the workspace, read by the fetch's too-large check
	held.Store(ws)
	stream := make(chan streamed, streamDepth)
	var ferr error
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		defer close(stream)
		ferr = s.fetch(fctx, j, held.Load, func(rec arrow.RecordBatch, _ uint64, n int64) error {
			select {
			case stream <- streamed{rec: rec, n: n}:
				return nil
			case <-fctx.Done():
				rec.Release()
				b.Release(n)
				return fctx.Err()
			}
		})
	}()
	var werr error
	for it := range stream {
		if werr == nil {
			werr = w.Write(it.rec)
			if werr == nil {
				var d int64
				d, werr = s.growWorkspace(fctx, w, ws)
				ws += d
				held.Store(ws)
			}
			if werr != nil {
				fcancel() // stop the fetch; keep draining what it queued
			}
		}
		it.rec.Release()
		b.Release(it.n)
	}
	<-fetched
	if err := errors.Join(werr, ferr); err != nil {
		if werr != nil {
			err = werr // the fetch only saw its cancellation
		}
		_ = w.Abort()
		return lance.Descriptor{}, err
	}
	if err := w.Finish(); err != nil {
		_ = w.Abort()
		return lance.Descriptor{}, err
	}
	free()
	return w.Close()
}
