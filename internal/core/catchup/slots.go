package catchup

import "strconv"

// freeSlot picks the lowest slot index in [0, max) not in used, or -1
// when all are held. Slots are numbered so that the admission transaction
// can guard one key's absence: two masters that pick the same slot race
// on it and one loses; capacity can never exceed max because no other
// slot key exists.
func freeSlot(used map[int]bool, max int) int {
	for n := 0; n < max; n++ {
		if !used[n] {
			return n
		}
	}
	return -1
}

// slotIndex parses the index of a slot key's last segment; ok is false for
// a key that is not a slot.
func slotIndex(dir, key string) (int, bool) {
	if len(key) <= len(dir) {
		return 0, false
	}
	n, err := strconv.Atoi(key[len(dir):])
	return n, err == nil && n >= 0
}
