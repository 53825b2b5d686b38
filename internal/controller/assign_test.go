package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// CreatePartitions with an explicit assignment, sent through a voter that
// is not the active controller: the new partitions have exactly the
// replicas asked for, in that order, the first leading; a bad assignment
// (also an empty list, which must survive the trip to the controller) is
// refused with INVALID_REPLICA_ASSIGNMENT and changes nothing.
func TestQuorumCreatePartitionsAssigned(t *testing.T) {
	c := newCluster(t, 3, 0, nil)
	via := c.follower()
	if err := via.CreateTopic(ctxT(t), "t", 1, 3, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][][]int32{{}, {{1, 2, 3}}, {{1, 2}, {1, 2, 3}}, {{1, 2, 2}, {1, 2, 3}}, {{1, 2, 9}, {1, 2, 3}}} {
		if err := via.CreatePartitions(ctxT(t), "t", 3, bad, false); !errors.Is(err, kerr.InvalidReplicaAssignment) {
			t.Errorf("%v: %v, want INVALID_REPLICA_ASSIGNMENT", bad, err)
		}
	}
	want := [][]int32{{3, 2, 1}, {2, 1, 3}}
	if err := via.CreatePartitions(ctxT(t), "t", 3, want, true); err != nil {
		t.Fatalf("validateOnly: %v", err)
	}
	if n := len(via.Image().Topics["t"].Partitions); n != 1 {
		t.Fatalf("%d partitions after refusals and validateOnly, want 1", n)
	}
	if err := via.CreatePartitions(ctxT(t), "t", 3, want, false); err != nil {
		t.Fatal(err)
	}
	ps := c.converged().Topics["t"].Partitions
	if len(ps) != 3 {
		t.Fatalf("%d partitions, want 3", len(ps))
	}
	for i, reps := range want {
		p := ps[i+1]
		if !slices.Equal(p.Replicas, reps) || p.Leader != reps[0] || !slices.Equal(p.ISR, reps) {
			t.Errorf("partition %d: replicas %v leader %d isr %v, want replicas and isr %v led by %d", p.Index, p.Replicas, p.Leader, p.ISR, reps, reps[0])
		}
	}
	// Without an assignment the controller still places them itself.
	if err := via.CreatePartitions(ctxT(t), "t", 4, nil, false); err != nil {
		t.Fatal(err)
	}
	if p := c.converged().Topics["t"].Partitions[3]; len(p.Replicas) != 3 {
		t.Fatalf("placed partition %+v", p)
	}
}
