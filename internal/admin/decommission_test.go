package admin

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A plan from planAssignment over brokers 1..n, as decommission sees it.
func decomInput(t *testing.T, topics []planTopic, n int) []decomPartition {
	t.Helper()
	var brokers []int32
	for b := int32(1); b <= int32(n); b++ {
		brokers = append(brokers, b)
	}
	plan, err := planAssignment(topics, brokers)
	if err != nil {
		t.Fatal(err)
	}
	var parts []decomPartition
	for _, p := range plan {
		parts = append(parts, decomPartition{p.Topic, p.Partition, p.Replicas})
	}
	return parts
}

// Decommissioning moves exactly the retired broker's replicas, each to a
// broker not already in the partition (in the same slot unless the retired
// broker was the preferred leader), and keeps the
// replicas and preferred leaderships balanced within one over the brokers
// left (starting from a balanced cluster).
func TestDecommissionPlan(t *testing.T) {
	for _, tc := range []struct {
		topics []planTopic
		n      int
		retire int32
		free   bool // every moved replica may go to every broker left
	}{
		// Round-robin RF 2 on 4 brokers: partitions {1,2} and {3,4}: 4's
		// replicas can only go to 1 and 2.
		{[]planTopic{{"a", 12, 2}}, 4, 4, false},
		{[]planTopic{{"a", 7, 3}, {"b", 5, 2}}, 5, 2, false},
		{[]planTopic{{"a", 6, 3}, {"b", 1, 1}, {"c", 5, 2}}, 6, 1, false},
		{[]planTopic{{"a", 50, 3}}, 4, 3, true},
		{[]planTopic{{"a", 3, 1}}, 2, 1, true},
		{[]planTopic{{"a", 11, 1}, {"b", 4, 1}}, 4, 2, true},
	} {
		what := fmt.Sprintf("%+v n=%d retire %d", tc.topics, tc.n, tc.retire)
		parts := decomInput(t, tc.topics, tc.n)
		var others []int32
		for b := int32(1); b <= int32(tc.n); b++ {
			others = append(others, b) // the retired broker is left out by the plan
		}
		plan, err := decommissionPlan(parts, tc.retire, others)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		moved := map[string][]int32{}
		for _, p := range plan {
			moved[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p.Replicas
		}
		replicas, leaders := map[int32]int{}, map[int32]int{}
		for _, b := range others {
			if b != tc.retire {
				replicas[b], leaders[b] = 0, 0
			}
		}
		for _, p := range parts {
			target, ok := moved[fmt.Sprintf("%s-%d", p.Topic, p.Partition)]
			slot := slices.Index(p.Replicas, tc.retire)
			if ok != (slot >= 0) {
				t.Fatalf("%s: %s-%d %v moved=%v", what, p.Topic, p.Partition, p.Replicas, ok)
			}
			if !ok {
				target = p.Replicas
			} else {
				// The same replicas but the retired one, plus one new one;
				// unless the retired broker led, in the same slots.
				added := 0
				for i, r := range target {
					if !slices.Contains(p.Replicas, r) {
						added++
					} else if slot != 0 && r != p.Replicas[i] {
						added = -1
					}
				}
				if added != 1 || len(target) != len(p.Replicas) {
					t.Fatalf("%s: %s-%d %v -> %v: not just the retired broker replaced", what, p.Topic, p.Partition, p.Replicas, target)
				}
			}
			for i, r := range target {
				if r == tc.retire || slices.Contains(target[:i], r) {
					t.Fatalf("%s: %s-%d target %v", what, p.Topic, p.Partition, target)
				}
				replicas[r]++
			}
			leaders[target[0]]++
		}
		// The most loaded broker is as little loaded as any choice of
		// replacements allows (brute force over every choice).
		if best := bestMaxLoad(parts, tc.retire, others); maxOf(replicas) != best {
			t.Errorf("%s: most loaded broker holds %d replicas, %d was possible: %v", what, maxOf(replicas), best, replicas)
		}
		if tc.free && spread(replicas) > 1 {
			t.Errorf("%s: unbalanced: replicas %v", what, replicas)
		}
		// Preferred leaderships are chosen greedily among each partition's
		// replicas once the replacements are fixed (not jointly with them):
		// in these cases the spread over the brokers left grows by at most
		// two (the first case reaches two: 3,5,4 from 3,3,3).
		before := map[int32]int{}
		for b := range leaders {
			before[b] = 0
		}
		for _, p := range parts {
			if p.Replicas[0] != tc.retire {
				before[p.Replicas[0]]++
			}
		}
		if spread(leaders) > spread(before)+2 {
			t.Errorf("%s: leaders %v (before, without the retired broker: %v)", what, leaders, before)
		}
	}
}

func spread(m map[int32]int) int {
	lo, hi := -1, 0
	for _, v := range m {
		if lo < 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return hi - lo
}

func TestDecommissionPlanErrors(t *testing.T) {
	parts := []decomPartition{{"a", 0, []int32{1, 2, 3}}, {"b", 0, []int32{1}}}
	if _, err := decommissionPlan(parts, 3, []int32{1, 2, 3}); err == nil || !strings.Contains(err.Error(), "a-0 has 3 replicas") {
		t.Fatalf("RF 3 on 2 brokers left: %v", err)
	}
	// A broker hosting nothing: an empty plan.
	if plan, err := decommissionPlan(parts, 4, []int32{1, 2, 3, 4}); err != nil || len(plan) != 0 {
		t.Fatalf("%v %v", plan, err)
	}
	// Dead brokers are not in others: only live ones take replicas.
	parts = []decomPartition{{"a", 0, []int32{1, 2}}, {"b", 0, []int32{1}}}
	plan, err := decommissionPlan(parts, 1, []int32{3, 2})
	if err != nil || len(plan) != 2 || !slices.Equal(plan[0].Replicas, []int32{3, 2}) || !slices.Equal(plan[1].Replicas, []int32{3}) {
		t.Fatalf("%+v %v", plan, err)
	}
}

func maxOf(m map[int32]int) int {
	hi := 0
	for _, v := range m {
		hi = max(hi, v)
	}
	return hi
}

// bestMaxLoad tries every choice of replacements and returns the smallest
// possible replica count of the most loaded broker left.
func bestMaxLoad(parts []decomPartition, id int32, others []int32) int {
	load := map[int32]int{}
	var moved []decomPartition
	for _, b := range others {
		if b != id {
			load[b] = 0
		}
	}
	for _, p := range parts {
		for _, r := range p.Replicas {
			if r != id {
				load[r]++
			}
		}
		if slices.Contains(p.Replicas, id) {
			moved = append(moved, p)
		}
	}
	best := -1
	var try func(i int)
	try = func(i int) {
		if i == len(moved) {
			if m := maxOf(load); best < 0 || m < best {
				best = m
			}
			return
		}
		for b := range load {
			if !slices.Contains(moved[i].Replicas, b) {
				load[b]++
				try(i + 1)
				load[b]--
			}
		}
	}
	try(0)
	return best
}
