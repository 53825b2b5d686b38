package chaos

import "testing"

// TestCheckGroup feeds the group checker hand-made histories: a clean
// handover, two owners at one generation, an owner that crashed, a
// committed offset going back, and an acknowledged send never consumed.
func TestCheckGroup(t *testing.T) {
	sends := []Send{{Value: "a", Outcome: "ok"}, {Value: "b", Outcome: "ok"}, {Value: "c", Outcome: "info"}}
	check := func(events []GroupEvent) map[string]int {
		a := &Analysis{Counts: map[string]int{}, Examples: map[string][]string{}}
		CheckGroup(a, events, sends)
		return a.Counts
	}
	consumedAll := GroupEvent{Kind: "consumed", Member: "m1", Partitions: []int32{0}, Offsets: []int64{0, 1}, Values: []string{"a", "b"}}

	clean := check([]GroupEvent{
		{Kind: "assigned", Member: "m1", Generation: 1, Partitions: []int32{0, 1}},
		consumedAll,
		{Kind: "committed", Member: "admin", Partitions: []int32{0}, Offsets: []int64{1}},
		{Kind: "revoked", Member: "m1", Generation: 1, Partitions: []int32{1}},
		{Kind: "assigned", Member: "m2", Generation: 2, Partitions: []int32{1}},
		{Kind: "crash", Member: "m1"},
		{Kind: "assigned", Member: "m2", Generation: 2, Partitions: []int32{0}},
		{Kind: "committed", Member: "admin", Partitions: []int32{0}, Offsets: []int64{2}},
	})
	for _, k := range GroupAnomalyNames {
		if clean[k] != 0 {
			t.Errorf("clean history: %s %d", k, clean[k])
		}
	}

	bad := check([]GroupEvent{
		{Kind: "assigned", Member: "m1", Generation: 3, Partitions: []int32{0}},
		{Kind: "assigned", Member: "m2", Generation: 3, Partitions: []int32{0}},
		{Kind: "assigned", Member: "m3", Generation: 4, Partitions: []int32{0}}, // a newer generation: m2 is a zombie
		{Kind: "committed", Member: "admin", Partitions: []int32{0}, Offsets: []int64{5}},
		{Kind: "committed", Member: "admin", Partitions: []int32{0}, Offsets: []int64{4}},
		{Kind: "consumed", Member: "m3", Partitions: []int32{0}, Offsets: []int64{0}, Values: []string{"a"}},
	})
	if bad[AnomDoubleOwner] != 1 || bad[AnomCommitBackward] != 1 || bad[AnomUnconsumed] != 1 {
		t.Errorf("bad history: %v, want one of each", bad)
	}
}
