package metadata

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/vfs"
)

func TestMergeAndRevert(t *testing.T) {
	reps, adding, removing := MergeReassignment([]int32{1, 2, 3}, []int32{4, 3, 5})
	if !slices.Equal(reps, []int32{4, 3, 5, 1, 2}) || !slices.Equal(adding, []int32{4, 5}) || !slices.Equal(removing, []int32{1, 2}) {
		t.Fatalf("%v %v %v", reps, adding, removing)
	}
	p := Partition{Replicas: reps, AddingReplicas: adding, RemovingReplicas: removing, ISR: []int32{4, 1}}
	if !p.Reassigning() || !slices.Equal(p.TargetReplicas(), []int32{4, 3, 5}) {
		t.Fatalf("target %v", p.TargetReplicas())
	}
	orig, isr, unclean := p.OriginalReplicas()
	if !slices.Equal(orig, []int32{3, 1, 2}) || !slices.Equal(isr, []int32{1}) || unclean {
		t.Fatalf("revert %v %v %v", orig, isr, unclean)
	}
	p.ISR = []int32{4}
	if _, isr, unclean = p.OriginalReplicas(); !unclean || !slices.Equal(isr, []int32{3, 1, 2}) {
		t.Fatalf("revert with only adding replicas in the ISR: %v %v", isr, unclean)
	}
}

func TestLocalElectAndReassign(t *testing.T) {
	l, err := OpenLocal(vfs.NewMem(), "/meta", config.Defaults(), Broker{ID: 7, Host: "h", Port: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.CreateTopic(ctx, "t", 1, 1, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	res, err := l.ElectLeaders(ctx, ElectPreferred, []TopicPartition{{"t", 0}, {"t", 1}})
	if err != nil || res[0].Code != kerr.ElectionNotNeeded.Code || res[1].Code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%v %+v", err, res)
	}
	if res, err = l.ElectLeaders(ctx, ElectUnclean, nil); err != nil || len(res) != 0 {
		t.Fatalf("all: %v %+v", err, res)
	}
	res, err = l.AlterPartitionReassignments(ctx, []Reassignment{
		{Topic: "t", Replicas: []int32{7}}, {Topic: "t", Replicas: []int32{8}}, {Topic: "t"},
	})
	if err != nil || res[0].Code != 0 || res[1].Code != kerr.InvalidReplicaAssignment.Code || res[2].Code != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("%v %+v", err, res)
	}
}
