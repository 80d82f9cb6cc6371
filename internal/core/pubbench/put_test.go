package pubbench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// The raw PutObject baseline puts objects of the table's data-file sizes
// to a real S3 server, counts them and removes them again.
func TestPutThroughputOnS3(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{Bucket: "bench-bucket"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := objstore.NewS3(ctx, srv.Bucket, "run-1", objstore.S3Options{Endpoint: srv.Endpoint, Region: s3server.Region,
		PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	mode := st.Sub("buffered")
	for i, n := range []int{3 << 20, 1 << 20, 5} {
		if err := mode.Put(ctx, "bench.lance/data/f"+string(rune('a'+i))+".lance", make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	sizes, err := DataFileSizes(ctx, mode, BenchTable)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int64{5, 1 << 20, 3 << 20}) {
		t.Fatalf("data file sizes %v", sizes)
	}
	r, err := PutThroughput(ctx, st, "raw-buffered", sizes)
	if err != nil {
		t.Fatal(err)
	}
	if r.Objects != 3 || r.Bytes != 4<<20+5 || r.Seconds <= 0 || r.MiBps <= 0 {
		t.Fatalf("result %+v", r)
	}
	left, err := st.List(ctx, "raw-buffered")
	if err != nil || len(left) != 0 {
		t.Fatalf("raw objects left behind: %v %v", left, err)
	}
}
