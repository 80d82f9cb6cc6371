package pubbench

import (
	"context"
	"crypto/rand"
	"fmt"
	"path"
	"time"

	"github.com/walctl/walctl/internal/core/objstore"
)

// PutResult is the raw upload baseline of a publication on an object
// store: the same bytes (objects of the sizes of the data files the
// publication wrote) put one after another, each with one PutObject, to
// the same store.
type PutResult struct {
	Bytes   int64   `json:"bytes"`
	Objects int     `json:"objects"`
	Seconds float64 `json:"seconds"`
	MiBps   float64 `json:"mib_per_s"`
}

// DataFileSizes lists the sizes of the data files of the table
// <table>.lance in st.
func DataFileSizes(ctx context.Context, st objstore.Store, table string) ([]int64, error) {
	infos, err := st.List(ctx, path.Join(table+".lance", "data"))
	if err != nil {
		return nil, err
	}
	sizes := make([]int64, 0, len(infos))
	for _, in := range infos {
		sizes = append(sizes, in.Size)
	}
	return sizes, nil
}

// PutThroughput uploads objects of sizes under dir of st with Put, one at a
// time, and deletes them again. The bytes are random and made before the
// clock starts (one buffer of the largest size, sliced), so the figure is
// the store's and the client's alone. On cancellation it stops and returns
// ctx's error; objects already put are deleted best-effort.
func PutThroughput(ctx context.Context, st objstore.Store, dir string, sizes []int64) (PutResult, error) {
	var largest int64
	for _, n := range sizes {
		largest = max(largest, n)
	}
	buf := make([]byte, largest)
	if _, err := rand.Read(buf); err != nil {
		return PutResult{}, err
	}
	var r PutResult
	keys := make([]string, 0, len(sizes))
	defer func() {
		for _, k := range keys {
			_ = st.Delete(context.WithoutCancel(ctx), k)
		}
	}()
	start := time.Now()
	for i, n := range sizes {
		key := path.Join(dir, fmt.Sprintf("raw-%05d", i))
		if err := st.Put(ctx, key, buf[:n]); err != nil {
			return r, fmt.Errorf("raw put baseline: %w", err)
		}
		keys = append(keys, key)
		r.Bytes += n
		r.Objects++
	}
	r.Seconds = time.Since(start).Seconds()
	if r.Seconds > 0 {
		r.MiBps = float64(r.Bytes) / (1 << 20) / r.Seconds
	}
	return r, nil
}
