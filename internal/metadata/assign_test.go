package metadata

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/vfs"
)

// AssignedPartitions keeps the replicas in the order given, the first
// active one leading, and refuses what Kafka's createPartitions refuses.
func TestAssignedPartitions(t *testing.T) {
	im := &Image{Brokers: map[int32]Broker{1: {ID: 1}, 2: {ID: 2}, 3: {ID: 3}, 4: {ID: 4, Fenced: true}, 5: {ID: 5, ShuttingDown: true}}}
	top := &Topic{Name: "t", Partitions: []Partition{{Index: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}}}
	parts, err := AssignedPartitions(im, top, 3, [][]int32{{3, 2, 1}, {4, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || parts[0].Index != 1 || !slices.Equal(parts[0].Replicas, []int32{3, 2, 1}) || parts[0].Leader != 3 || !slices.Equal(parts[0].ISR, []int32{3, 2, 1}) {
		t.Fatalf("partition 1: %+v", parts)
	}
	// A fenced first replica stays the preferred one but does not lead.
	if p := parts[1]; p.Index != 2 || !slices.Equal(p.Replicas, []int32{4, 2, 3}) || p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 3}) {
		t.Fatalf("partition 2: %+v", p)
	}
	for _, tc := range []struct {
		count      int32
		assignment [][]int32
		msg        string
	}{
		{3, [][]int32{{1, 2, 3}}, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."},
		{2, [][]int32{}, "Attempted to add 1 additional partition(s), but only 0 assignment(s) were specified."},
		{2, [][]int32{{}}, "includes an empty replica list"},
		{2, [][]int32{{1, 2, 9}}, "includes broker 9, but no such broker is registered"},
		{2, [][]int32{{1, 2, 1}}, "includes the broker 1 more than once"},
		{2, [][]int32{{1, 2}}, "with 2 replica(s), but this is not consistent with previous partitions, which have 3 replica(s)"},
		{2, [][]int32{{4, 5}}, "with 2 replica(s)"},
	} {
		_, err := AssignedPartitions(im, top, tc.count, tc.assignment)
		if !errors.Is(err, kerr.InvalidReplicaAssignment) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: %v, want INVALID_REPLICA_ASSIGNMENT %q", tc.assignment, err, tc.msg)
		}
	}
	one := &Topic{Name: "o", Partitions: []Partition{{Index: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}}
	if _, err := AssignedPartitions(im, one, 2, [][]int32{{4}}); !errors.Is(err, kerr.InvalidReplicaAssignment) || !strings.Contains(err.Error(), "partition 1 are fenced or in controlled shutdown") {
		t.Errorf("fenced only: %v", err)
	}
}

// The single-node controller takes an explicit assignment naming itself
// and refuses any other.
func TestLocalCreatePartitionsAssigned(t *testing.T) {
	l, err := OpenLocal(vfs.NewMem(), "/meta", config.Defaults(), Broker{ID: 7, Host: "h", Port: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.CreateTopic(ctx, "t", 1, 1, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][][]int32{{{8}}, {{7}, {7}}, {{7, 7}}, {}} {
		if err := l.CreatePartitions(ctx, "t", 2, bad, false); !errors.Is(err, kerr.InvalidReplicaAssignment) {
			t.Errorf("%v: %v, want INVALID_REPLICA_ASSIGNMENT", bad, err)
		}
	}
	if err := l.CreatePartitions(ctx, "t", 3, [][]int32{{7}, {7}}, true); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Image().Topics["t"].Partitions); n != 1 {
		t.Fatalf("validateOnly created partitions: %d", n)
	}
	if err := l.CreatePartitions(ctx, "t", 3, [][]int32{{7}, {7}}, false); err != nil {
		t.Fatal(err)
	}
	ps := l.Image().Topics["t"].Partitions
	if len(ps) != 3 || ps[2].Index != 2 || ps[2].Leader != 7 || !slices.Equal(ps[2].Replicas, []int32{7}) || !slices.Equal(ps[2].ISR, []int32{7}) {
		t.Fatalf("partitions %+v", ps)
	}
}
