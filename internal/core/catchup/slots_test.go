package catchup

import "testing"

func TestFreeSlot(t *testing.T) {
	for _, tc := range []struct {
		used map[int]bool
		max  int
		want int
	}{
		{nil, 4, 0},
		{map[int]bool{0: true, 1: true}, 4, 2},
		{map[int]bool{1: true}, 4, 0},
		{map[int]bool{0: true, 1: true, 2: true, 3: true}, 4, -1},
		{map[int]bool{7: true}, 1, 0}, // a slot beyond max does not open one below it
		{nil, 0, -1},
	} {
		if got := freeSlot(tc.used, tc.max); got != tc.want {
			t.Errorf("freeSlot(%v, %d) = %d, want %d", tc.used, tc.max, got, tc.want)
		}
	}
	for key, want := range map[string]int{"/p/slots/0": 0, "/p/slots/12": 12} {
		if n, ok := slotIndex("/p/slots/", key); !ok || n != want {
			t.Errorf("slotIndex(%s) = %d, %v", key, n, ok)
		}
	}
	for _, key := range []string{"/p/slots/", "/p/slots/x", "/p/slots/-1"} {
		if _, ok := slotIndex("/p/slots/", key); ok {
			t.Errorf("slotIndex(%s) accepted", key)
		}
	}
}
