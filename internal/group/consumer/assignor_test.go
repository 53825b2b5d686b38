package consumer

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func tid(i int) TopicID { return TopicID{15: byte(i + 1)} }

// checkValid verifies every partition of a topic some member subscribes to
// is assigned to exactly one member, and only to a subscriber.
func checkValid(t *testing.T, spec AssignmentSpec, got map[string]Assignment) {
	t.Helper()
	owner := map[TP]string{}
	for id, a := range got {
		if _, ok := spec.Members[id]; !ok {
			t.Fatalf("assignment for unknown member %s", id)
		}
		for _, tp := range a.TPs() {
			if prev, dup := owner[tp]; dup {
				t.Fatalf("%v assigned to %s and %s", tp, prev, id)
			}
			if !subscribes(spec.Members[id], tp.Topic) {
				t.Fatalf("%v assigned to %s, not subscribed", tp, id)
			}
			if n := spec.Partitions[tp.Topic]; tp.Partition >= n {
				t.Fatalf("%v does not exist", tp)
			}
			owner[tp] = id
		}
	}
	for id := range spec.Members {
		if _, ok := got[id]; !ok {
			t.Fatalf("member %s missing from the result", id)
		}
	}
	for topic, n := range spec.Partitions {
		subscribed := false
		for _, m := range spec.Members {
			subscribed = subscribed || subscribes(m, topic)
		}
		for p := range n {
			if _, ok := owner[TP{topic, p}]; subscribed && !ok {
				t.Fatalf("%v unassigned", TP{topic, p})
			}
		}
	}
}

func balanceSpread(got map[string]Assignment) int {
	lo, hi := 1<<30, -1
	for _, a := range got {
		lo, hi = min(lo, a.Count()), max(hi, a.Count())
	}
	return hi - lo
}

// homSpec builds a homogeneous group: members m0..m{n-1} subscribed to
// topics with the given partition counts.
func homSpec(r *rand.Rand, members, topics int) AssignmentSpec {
	spec := AssignmentSpec{Members: map[string]MemberSpec{}, Partitions: map[TopicID]int32{}}
	var subs []TopicID
	for i := range topics {
		spec.Partitions[tid(i)] = int32(r.IntN(12) + 1)
		subs = append(subs, tid(i))
	}
	for i := range members {
		spec.Members[fmt.Sprintf("m%02d", i)] = MemberSpec{Subscribed: subs}
	}
	return spec
}

// withTargets returns spec with each member's target set from got.
func withTargets(spec AssignmentSpec, got map[string]Assignment) AssignmentSpec {
	out := AssignmentSpec{Members: map[string]MemberSpec{}, Partitions: spec.Partitions}
	for id, m := range spec.Members {
		m.Target = got[id]
		out.Members[id] = m
	}
	return out
}

// TestUniformProperties: valid, balanced within one, deterministic, and
// sticky: a member joining takes only its share (every other member only
// loses partitions, and the number moved is what the newcomer gets); a
// member leaving moves only its own partitions.
func TestUniformProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	a := UniformAssignor{}
	for iter := range 300 {
		spec := homSpec(r, r.IntN(8)+1, r.IntN(4)+1)
		got := a.Assign(spec)
		checkValid(t, spec, got)
		if s := balanceSpread(got); s > 1 {
			t.Fatalf("iter %d: spread %d: %v", iter, s, got)
		}
		spec = withTargets(spec, got)
		again := a.Assign(spec)
		for id := range got {
			if !again[id].Equal(got[id]) {
				t.Fatalf("iter %d: reassigning a settled group moved %s", iter, id)
			}
		}

		// Join.
		var subs []TopicID
		for _, m := range spec.Members {
			subs = m.Subscribed
			break
		}
		joined := withTargets(spec, got)
		joined.Members["new"] = MemberSpec{Subscribed: subs}
		after := a.Assign(joined)
		checkValid(t, joined, after)
		if s := balanceSpread(after); s > 1 {
			t.Fatalf("iter %d: spread after join %d", iter, s)
		}
		for id, before := range got {
			if gained := after[id].minus(before); gained.Count() != 0 {
				t.Fatalf("iter %d: %s gained %v when another member joined", iter, id, gained)
			}
		}

		// Leave.
		var gone string
		for id := range got {
			gone = id
			break
		}
		left := withTargets(spec, got)
		delete(left.Members, gone)
		after = a.Assign(left)
		checkValid(t, left, after)
		if s := balanceSpread(after); len(left.Members) > 0 && s > 1 {
			t.Fatalf("iter %d: spread after leave %d", iter, s)
		}
		for id := range left.Members {
			if lost := got[id].minus(after[id]); lost.Count() != 0 {
				t.Fatalf("iter %d: %s lost %v when %s left", iter, id, lost, gone)
			}
		}
	}
}

// TestUniformHeterogeneous: members subscribed to different topics still
// get every partition exactly once, and a settled assignment is kept.
func TestUniformHeterogeneous(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a := UniformAssignor{}
	for range 300 {
		spec := AssignmentSpec{Members: map[string]MemberSpec{}, Partitions: map[TopicID]int32{}}
		nt := r.IntN(4) + 1
		for i := range nt {
			spec.Partitions[tid(i)] = int32(r.IntN(10) + 1)
		}
		for i := range r.IntN(6) + 1 {
			var subs []TopicID
			for j := range nt {
				if r.IntN(2) == 0 {
					subs = append(subs, tid(j))
				}
			}
			spec.Members[fmt.Sprintf("m%d", i)] = MemberSpec{Subscribed: subs}
		}
		// Topics nobody subscribes to are not in the spec.
		for t := range spec.Partitions {
			used := false
			for _, m := range spec.Members {
				used = used || subscribes(m, t)
			}
			if !used {
				delete(spec.Partitions, t)
			}
		}
		got := a.Assign(spec)
		checkValid(t, spec, got)
		again := a.Assign(withTargets(spec, got))
		for id := range got {
			if !again[id].Equal(got[id]) {
				t.Fatalf("reassigning a settled heterogeneous group moved %s: %v -> %v", id, got[id], again[id])
			}
		}
	}
}

// TestRangeProperties: valid, per-topic balance within one, and members
// with the same subscription get the same partition numbers of two topics
// with the same partition count (co-partitioning).
func TestRangeProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a := RangeAssignor{}
	for range 300 {
		spec := homSpec(r, r.IntN(6)+1, 2)
		spec.Partitions[tid(1)] = spec.Partitions[tid(0)]
		got := a.Assign(spec)
		checkValid(t, spec, got)
		lo, hi := 1<<30, -1
		for id, as := range got {
			n0, n1 := len(as[tid(0)]), len(as[tid(1)])
			lo, hi = min(lo, n0), max(hi, n0)
			if fmt.Sprint(as[tid(0)]) != fmt.Sprint(as[tid(1)]) {
				t.Fatalf("%s not co-partitioned: %v vs %v", id, as[tid(0)], as[tid(1)])
			}
			_ = n1
		}
		if hi-lo > 1 {
			t.Fatalf("range spread %d", hi-lo)
		}
	}
}

func TestRangeExample(t *testing.T) {
	spec := AssignmentSpec{
		Members: map[string]MemberSpec{
			"a": {Subscribed: []TopicID{tid(0)}},
			"b": {Subscribed: []TopicID{tid(0)}},
		},
		Partitions: map[TopicID]int32{tid(0): 3},
	}
	got := RangeAssignor{}.Assign(spec)
	if fmt.Sprint(got["a"][tid(0)], got["b"][tid(0)]) != "[0 1] [2]" {
		t.Fatalf("got %v", got)
	}
}

// TestRangeStaticOrder: static members come first, by instance id, so a
// static member rejoining under a new member id keeps its ranges.
func TestRangeStaticOrder(t *testing.T) {
	spec := AssignmentSpec{
		Members: map[string]MemberSpec{
			"a":  {Subscribed: []TopicID{tid(0)}},
			"zz": {InstanceID: "i1", Subscribed: []TopicID{tid(0)}},
			"b":  {InstanceID: "i2", Subscribed: []TopicID{tid(0)}},
		},
		Partitions: map[TopicID]int32{tid(0): 3},
	}
	got := RangeAssignor{}.Assign(spec)
	if fmt.Sprint(got["zz"][tid(0)], got["b"][tid(0)], got["a"][tid(0)]) != "[0] [1] [2]" {
		t.Fatalf("got %v", got)
	}
}
