package metadata

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Election types of ElectLeaders (KIP-460's ElectionType).
const (
	ElectPreferred int8 = 0
	ElectUnclean   int8 = 1
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// PartitionResult is one partition's outcome of ElectLeaders or
// AlterPartitionReassignments: a Kafka error code (0: done) and message.
type PartitionResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Code      int16  `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Err returns the result as an error (nil for code 0).
func (r PartitionResult) Err() error {
	if r.Code == 0 {
		return nil
	}
	if r.Message == "" {
		return kerr.ErrorForCode(r.Code)
	}
	return fmt.Errorf("%w: %s", kerr.ErrorForCode(r.Code), r.Message)
}

// Reassignment is one partition of AlterPartitionReassignments: the target
// replicas, or nil to cancel the partition's reassignment (KIP-455).
type Reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// LeaderElector is a Controller that serves ElectLeaders (KIP-460).
// Local and the Raft controller are.
type LeaderElector interface {
	// ElectLeaders elects leaders of the given partitions (nil: every
	// partition, and then the partitions answered ELECTION_NOT_NEEDED are
	// left out, as Kafka's ReplicationControlManager.electLeaders does).
	// The error return is for the call as a whole.
	ElectLeaders(ctx context.Context, typ int8, parts []TopicPartition) ([]PartitionResult, error)
}

// Reassigner is a Controller that serves AlterPartitionReassignments
// (KIP-455). Local and the Raft controller are. Ongoing reassignments are
// read from the image (Partition.AddingReplicas, RemovingReplicas).
type Reassigner interface {
	// AlterPartitionReassignments starts, replaces or cancels (nil
	// Replicas) reassignments; one result per item, in order.
	AlterPartitionReassignments(ctx context.Context, items []Reassignment) ([]PartitionResult, error)
}

// Reassigning reports whether a reassignment is in progress.
func (p *Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// TargetReplicas is the replica set a reassignment in progress moves to
// (Replicas without RemovingReplicas, in order), or Replicas.
func (p *Partition) TargetReplicas() []int32 {
	return slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return slices.Contains(p.RemovingReplicas, r) })
}

// OriginalReplicas is the replica set before the reassignment in progress
// (Replicas without AddingReplicas), and the ISR without the adding
// replicas: what cancelling reverts to (Kafka's PartitionReassignmentRevert).
// unclean is set if no original replica is in the ISR (the revert then
// takes every original replica as ISR, as Kafka does).
func (p *Partition) OriginalReplicas() (replicas, isr []int32, unclean bool) {
	adding := func(r int32) bool { return slices.Contains(p.AddingReplicas, r) }
	replicas = slices.DeleteFunc(slices.Clone(p.Replicas), adding)
	isr = slices.DeleteFunc(slices.Clone(p.ISR), adding)
	if len(isr) == 0 {
		return replicas, slices.Clone(replicas), true
	}
	return replicas, isr, false
}

// MergeReassignment is Kafka's PartitionReassignmentReplicas: moving from
// current to target, the replica set is the target followed by the
// current replicas not in it (removing); adding are the target replicas
// not in current.
func MergeReassignment(current, target []int32) (replicas, adding, removing []int32) {
	replicas = slices.Clone(target)
	for _, r := range current {
		if !slices.Contains(target, r) {
			removing = append(removing, r)
			replicas = append(replicas, r)
		}
	}
	for _, r := range target {
		if !slices.Contains(current, r) {
			adding = append(adding, r)
		}
	}
	return replicas, adding, removing
}

// ValidateTargetReplicas applies Kafka's checks of a manual assignment
// (ReplicationControlManager.validateManualPartitionAssignment): not
// empty, no broker twice, every broker registered.
func ValidateTargetReplicas(im *Image, target []int32) error {
	if len(target) == 0 {
		return fmt.Errorf("%w: the manual partition assignment includes an empty replica list", kerr.InvalidReplicaAssignment)
	}
	for i, r := range target {
		if slices.Contains(target[:i], r) {
			return fmt.Errorf("%w: the manual partition assignment includes the broker %d more than once", kerr.InvalidReplicaAssignment, r)
		}
		if _, ok := im.Brokers[r]; !ok {
			return fmt.Errorf("%w: the manual partition assignment includes broker %d, but no such broker is registered", kerr.InvalidReplicaAssignment, r)
		}
	}
	return nil
}

// lookupPartition finds a partition of the image.
func lookupPartition(im *Image, topic string, part int32) (*Partition, error) {
	t, ok := im.Topics[topic]
	if !ok || part < 0 || int(part) >= len(t.Partitions) {
		return nil, kerr.UnknownTopicOrPartition
	}
	return &t.Partitions[part], nil
}

// resultOf builds a PartitionResult from an error.
func resultOf(tp TopicPartition, err error) PartitionResult {
	r := PartitionResult{Topic: tp.Topic, Partition: tp.Partition}
	if err != nil {
		r.Code = kerr.UnknownServerError.Code
		if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
			r.Code = ke.Code
		}
		r.Message = err.Error()
	}
	return r
}

// ElectLeaders implements LeaderElector. The single node is every
// partition's only replica and leader: a preferred election is never
// needed, nor an unclean one (the partition has a leader).
func (l *Local) ElectLeaders(_ context.Context, typ int8, parts []TopicPartition) ([]PartitionResult, error) {
	if typ != ElectPreferred && typ != ElectUnclean {
		return nil, kerr.InvalidRequest
	}
	im := l.store.Image()
	if parts == nil {
		return nil, nil // every partition would be ELECTION_NOT_NEEDED, left out
	}
	out := make([]PartitionResult, 0, len(parts))
	for _, tp := range parts {
		p, err := lookupPartition(im, tp.Topic, tp.Partition)
		if err == nil && p.Leader >= 0 {
			err = kerr.ElectionNotNeeded
		}
		out = append(out, resultOf(tp, err))
	}
	return out, nil
}

// AlterPartitionReassignments implements Reassigner. Only this node can
// hold a replica: the target [self] is the current assignment (the
// reassignment completes at once), any other broker is not registered, and
// no reassignment is ever in progress to cancel.
func (l *Local) AlterPartitionReassignments(_ context.Context, items []Reassignment) ([]PartitionResult, error) {
	im := l.store.Image()
	out := make([]PartitionResult, 0, len(items))
	for _, it := range items {
		tp := TopicPartition{it.Topic, it.Partition}
		_, err := lookupPartition(im, it.Topic, it.Partition)
		switch {
		case err != nil:
		case it.Replicas == nil:
			err = kerr.NoReassignmentInProgress
		default:
			err = ValidateTargetReplicas(im, it.Replicas)
		}
		out = append(out, resultOf(tp, err))
	}
	return out, nil
}
