package objstore

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// The CRC-32C of a concatenation, combined from the parts' own checksums,
// is the checksum of the whole: what a multipart upload's completion sends.
func TestCRC32CombineIsTheChecksumOfTheWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	whole := make([]byte, 3<<20)
	for i := range whole {
		whole[i] = byte(r.Uint32())
	}
	for _, cuts := range [][]int{{0}, {1}, {5 << 20 >> 2, 2 << 20}, {7, 8, 1 << 20, 3<<20 - 1}, {3 << 20}} {
		var got uint32
		prev := 0
		for _, c := range append(cuts, len(whole)) {
			part := whole[prev:c]
			got = crc32Combine(got, crc32.Checksum(part, castagnoli), int64(len(part)))
			prev = c
		}
		if want := crc32.Checksum(whole, castagnoli); got != want {
			t.Fatalf("cuts %v: combined %08x, whole %08x", cuts, got, want)
		}
	}
}
