package metadata

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AssignedPartitions validates the explicit replica assignment of a
// CreatePartitions growing topic t to count partitions in image im and
// returns the new partitions, as Kafka's
// ReplicationControlManager.createPartitions does:
//
//   - one replica list per new partition (INVALID_REPLICA_ASSIGNMENT
//     otherwise: "Attempted to add N additional partition(s), but only M
//     assignment(s) were specified.");
//   - each list not empty, of registered brokers, without duplicates, and
//     as long as the topic's replication factor (the replicas of its first
//     partition), else INVALID_REPLICA_ASSIGNMENT
//     (validateManualPartitionAssignment);
//   - the replicas are kept in the order given: the first is the
//     preferred leader. The ISR is the active ones (not fenced, not
//     shutting down) in that order and the first of them leads; a
//     partition with none is refused (INVALID_REPLICA_ASSIGNMENT).
//
// count must already be checked to exceed the topic's partitions.
func AssignedPartitions(im *Image, t *Topic, count int32, assignment [][]int32) ([]Partition, error) {
	cur := int32(len(t.Partitions))
	if int64(len(assignment)) != int64(count)-int64(cur) {
		return nil, fmt.Errorf("%w: Attempted to add %d additional partition(s), but only %d assignment(s) were specified.",
			kerr.InvalidReplicaAssignment, count-cur, len(assignment))
	}
	rf := 1
	if cur > 0 {
		rf = len(t.Partitions[0].Replicas)
	}
	out := make([]Partition, 0, len(assignment))
	for i, reps := range assignment {
		if err := checkManualAssignment(im, reps, rf); err != nil {
			return nil, err
		}
		index := cur + int32(i)
		var isr []int32
		for _, r := range reps {
			if im.Brokers[r].Active() {
				isr = append(isr, r)
			}
		}
		if len(isr) == 0 {
			return nil, fmt.Errorf("%w: All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.",
				kerr.InvalidReplicaAssignment, index)
		}
		out = append(out, Partition{Index: index, Leader: isr[0], Replicas: slices.Clone(reps), ISR: isr})
	}
	return out, nil
}

// checkManualAssignment is Kafka's validateManualPartitionAssignment for
// one partition's replicas reps of a topic of replication factor rf.
func checkManualAssignment(im *Image, reps []int32, rf int) error {
	if len(reps) == 0 {
		return fmt.Errorf("%w: The manual partition assignment includes an empty replica list.", kerr.InvalidReplicaAssignment)
	}
	sorted := slices.Sorted(slices.Values(reps))
	for i, id := range sorted {
		if _, ok := im.Brokers[id]; !ok {
			return fmt.Errorf("%w: The manual partition assignment includes broker %d, but no such broker is registered.", kerr.InvalidReplicaAssignment, id)
		}
		if i > 0 && sorted[i-1] == id {
			return fmt.Errorf("%w: The manual partition assignment includes the broker %d more than once.", kerr.InvalidReplicaAssignment, id)
		}
	}
	if len(reps) != rf {
		return fmt.Errorf("%w: The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).",
			kerr.InvalidReplicaAssignment, len(reps), rf)
	}
	return nil
}
