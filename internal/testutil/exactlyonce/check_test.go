package exactlyonce

import (
	"slices"
	"testing"
)

func TestCheck(t *testing.T) {
	acked := map[int64]bool{1: true, 2: true, 3: true}
	for _, tc := range []struct {
		name                         string
		ids                          []int64
		missing, duplicated, unacked []int64
	}{
		{"exactly once", []int64{3, 1, 2}, nil, nil, nil},
		{"lost", []int64{1, 3}, []int64{2}, nil, nil},
		{"duplicated", []int64{1, 2, 2, 3}, nil, []int64{2}, nil},
		{"never ACKed", []int64{1, 2, 3, 9}, nil, nil, []int64{9}},
		{"all three", []int64{1, 1, 9}, []int64{2, 3}, []int64{1}, []int64{9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.ids, acked)
			if !slices.Equal(r.Missing, tc.missing) || !slices.Equal(r.Duplicated, tc.duplicated) || !slices.Equal(r.Unacked, tc.unacked) {
				t.Fatalf("got missing %v duplicated %v unacked %v", r.Missing, r.Duplicated, r.Unacked)
			}
			if ok := tc.missing == nil && tc.duplicated == nil && tc.unacked == nil; (r.Err() == nil) != ok {
				t.Fatalf("Err() = %v, want ok=%v", r.Err(), ok)
			}
		})
	}
}
