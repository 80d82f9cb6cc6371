package publish

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/lance"
)

// streamDepth bounds the decoded entries queued between a file's fetch and
// its writer (each also holds its bytes in the budget).
const streamDepth = 4

// streamed is one decoded WAL entry on its way to a file writer.
type streamed struct {
	rec arrow.RecordBatch
	n   int64 // bytes reserved in the budget
}

// prepareStreamed writes the plan's files, Config.StreamFiles at once: each admitted file
// has a writer fed by a bounded stream of decoded record batches, written as
// they arrive — the batches the WAL decoded, not a re-serialisation of them.
// A writer is admitted once its encoder workspace is reserved; its entries
// take their bytes as they are fetched and free them once written.
func (s *Session) prepareStreamed(ctx context.Context, plan *Plan, schema *lance.Schema, fv lance.FileVersion, jobs []fileJob) ([]lance.Descriptor, error) {
	return s.prepareFiles(ctx, plan, jobs, s.p.cfg.StreamFiles, func(fileJob) int64 { return workspaceBound },
		func(ctx context.Context, j fileJob, held int64, written func(int64)) (lance.Descriptor, error) {
			return s.streamFile(ctx, schema, fv, j, held, written)
		})
}

// streamFile writes one file from a bounded stream fed by its own fetch (a
// writeFile). Its admission reserved ws, the encoder workspace; it holds
// more if the encoder outgrows it. It returns only after the fetch returned
// and the stream is drained.
func (s *Session) streamFile(ctx context.Context, schema *lance.Schema, fv lance.FileVersion, j fileJob, ws int64, written func(held int64)) (lance.Descriptor, error) {
	b := s.p.cfg.Budget
	var keep int64 // held until Close (finishFile)
	free := sync.OnceFunc(func() { written(ws - keep) })
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
		reserve := func(ctx context.Context, n int64, what string) error {
			if err := tooLarge(b, n, held.Load(), what); err != nil {
				return err
			}
			return b.Reserve(ctx, n, what)
		}
		ferr = s.fetch(fctx, j, reserve, func(rec arrow.RecordBatch, _ uint64, n int64) error {
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
	return s.finishFile(w, j, func(k int64) int64 { keep = min(k, ws); free(); return keep })
}
