package share

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkAssignment checks the simple assignor's properties: members get
// only partitions of topics they subscribe to; every partition of a
// subscribed topic goes to at least one member; per topic, with no more
// subscribers than partitions each partition has exactly one member and
// the subscribers' counts differ by at most one, and with more
// subscribers each has exactly one partition and the partitions' member
// counts differ by at most one; a homogeneous group is balanced overall.
func checkAssignment(t *testing.T, spec AssignmentSpec, out map[string]Assignment) {
	t.Helper()
	subs := map[TopicID][]string{}
	homogeneous := true
	first, seen := "", false
	for id, topics := range spec.Members {
		if _, ok := out[id]; !ok {
			t.Fatalf("member %s missing", id)
		}
		if !seen {
			first, seen = fmt.Sprint(topics), true
		} else if first != fmt.Sprint(topics) {
			homogeneous = false
		}
		for _, tt := range topics {
			subs[tt] = append(subs[tt], id)
		}
		for tt := range out[id] {
			found := false
			for _, s := range topics {
				found = found || s == tt
			}
			if !found {
				t.Fatalf("member %s got unsubscribed topic %v", id, tt)
			}
		}
	}
	for tt, members := range subs {
		n := int(spec.Partitions[tt])
		if n == 0 {
			continue
		}
		perPartition := make([]int, n)
		minM, maxM := 1<<30, -1
		for _, id := range members {
			ps := out[id][tt]
			minM, maxM = min(minM, len(ps)), max(maxM, len(ps))
			for _, p := range ps {
				if int(p) >= n || p < 0 {
					t.Fatalf("partition %d of %d", p, n)
				}
				perPartition[p]++
			}
		}
		minP, maxP := 1<<30, -1
		for _, c := range perPartition {
			minP, maxP = min(minP, c), max(maxP, c)
		}
		if minP < 1 {
			t.Fatalf("topic %v: a partition without member %v", tt, perPartition)
		}
		if len(members) <= n && (maxP != 1 || maxM-minM > 1) {
			t.Fatalf("topic %v (%d partitions, %d members): per partition %v, per member %d..%d", tt, n, len(members), perPartition, minM, maxM)
		}
		if len(members) > n && (minM != 1 || maxM != 1 || maxP-minP > 1) {
			t.Fatalf("topic %v (%d partitions, %d members): per partition %v, per member %d..%d", tt, n, len(members), perPartition, minM, maxM)
		}
	}
	if homogeneous {
		lo, hi := 1<<30, -1
		for id := range spec.Members {
			c := out[id].Count()
			lo, hi = min(lo, c), max(hi, c)
		}
		if hi-lo > 1 {
			t.Fatalf("homogeneous group unbalanced: %d..%d: %v %v", lo, hi, spec, out)
		}
	}
}

func TestSimpleAssignorProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		spec := AssignmentSpec{Members: map[string][]TopicID{}, Partitions: map[TopicID]int32{}, Previous: map[string]Assignment{}}
		nt := 1 + rng.IntN(5)
		var topics []TopicID
		for i := range nt {
			id := TopicID{byte(i + 1)}
			topics = append(topics, id)
			spec.Partitions[id] = int32(rng.IntN(12))
		}
		homogeneous := iter%2 == 0
		nm := rng.IntN(15)
		for i := range nm {
			var sub []TopicID
			for _, tt := range topics {
				if homogeneous || rng.IntN(2) == 0 {
					sub = append(sub, tt)
				}
			}
			spec.Members[fmt.Sprintf("m%02d", i)] = sub
		}
		out := SimpleAssignor{}.Assign(spec)
		checkAssignment(t, spec, out)
		// Again with that result as the previous target, after a random
		// change of membership and partition counts: still valid, and
		// stable when nothing changed.
		again := SimpleAssignor{}.Assign(AssignmentSpec{Members: spec.Members, Partitions: spec.Partitions, Previous: out})
		for id := range out {
			if !again[id].Equal(out[id]) {
				t.Fatalf("not stable for %s: %v then %v", id, out[id], again[id])
			}
		}
		spec.Previous = out
		for id := range spec.Members {
			if rng.IntN(4) == 0 {
				delete(spec.Members, id)
			}
		}
		spec.Members["new"] = topics
		for _, tt := range topics {
			if rng.IntN(3) == 0 {
				spec.Partitions[tt] += int32(rng.IntN(4))
			}
		}
		checkAssignment(t, spec, SimpleAssignor{}.Assign(spec))
	}
}

// TestSimpleAssignorSticky: a member joining a balanced group moves only
// what balance needs.
func TestSimpleAssignorSticky(t *testing.T) {
	tt := TopicID{1}
	spec := AssignmentSpec{Members: map[string][]TopicID{"a": {tt}, "b": {tt}}, Partitions: map[TopicID]int32{tt: 6}}
	out := SimpleAssignor{}.Assign(spec)
	spec.Members["c"] = []TopicID{tt}
	spec.Previous = out
	next := SimpleAssignor{}.Assign(spec)
	moved := 0
	for _, id := range []string{"a", "b"} {
		moved += out[id].Count() - next[id].Count()
		for _, p := range next[id][tt] {
			if !out[id].Has(TP{Topic: tt, Partition: p}) {
				t.Fatalf("%s got new partition %d", id, p)
			}
		}
	}
	if moved != 2 || next["c"].Count() != 2 {
		t.Fatalf("moved %d: %v", moved, next)
	}
}
