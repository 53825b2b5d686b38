package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// Leader elections on request (ElectLeaders, KIP-460) and partition
// reassignment (AlterPartitionReassignments, KIP-455), as decisions of the
// active controller with Kafka's ReplicationControlManager semantics.
//
// A reassignment sets the partition's replicas to the target followed by
// the replicas being removed, and records the adding and removing replicas
// (PartitionReassignmentReplicas). The ISR and the leader stay; brokers
// reconcile the new replica set (an adding replica opens its log and
// fetches from the leader), and the leader adds each adding replica to the
// ISR once it has caught up (AlterPartition). Every partition change
// completes the reassignment once its new ISR holds every target replica
// (PartitionChangeBuilder.completeReassignmentIfNeeded): the replicas
// become the target, the removing replicas leave the ISR and, if the
// leader is one of them, the first target replica in the new ISR leads.
// A broker no longer in the replica set deletes its replica (reconcile).
// Cancelling reverts to the original replicas (PartitionReassignmentRevert).

// RPC operations of this file.
const (
	opElectLeaders       = "ElectLeaders"
	opAlterReassignments = "AlterPartitionReassignments"
)

func init() {
	handlers[opElectLeaders] = (*active).electLeaders
	handlers[opAlterReassignments] = (*active).alterReassignments
}

type electReq struct {
	Type  int8                      `json:"type"`
	Parts []metadata.TopicPartition `json:"parts"` // nil: every partition
}

type partResults struct {
	Results []metadata.PartitionResult `json:"results"`
}

type reassignReq struct {
	Items []metadata.Reassignment `json:"items"`
}

// resultOf turns a decision's error into a partition result.
func resultOf(topic string, part int32, err error) metadata.PartitionResult {
	r := metadata.PartitionResult{Topic: topic, Partition: part}
	if err != nil {
		r.Code = kerr.UnknownServerError.Code
		var ke *kerr.Error
		if errors.As(err, &ke) {
			r.Code = ke.Code
		}
		if _, plain := err.(*kerr.Error); !plain {
			r.Message = err.Error()
		}
	}
	return r
}

// partitionOf finds a partition on the scratch image.
func partitionOf(im *metadata.Image, topic string, part int32) (*metadata.Topic, *metadata.Partition, error) {
	t, ok := im.Topics[topic]
	if !ok || part < 0 || int(part) >= len(t.Partitions) {
		return nil, nil, kerr.UnknownTopicOrPartition
	}
	return t, &t.Partitions[part], nil
}

// electOne is ReplicationControlManager.electLeader for one partition.
// Preferred: the first replica leads if it is in the ISR and active
// (ELECTION_NOT_NEEDED if it already leads, PREFERRED_LEADER_NOT_AVAILABLE
// otherwise). Unclean: only a leaderless partition (ELECTION_NOT_NEEDED
// otherwise); the first active ISR member in replica order if there is
// one, else the first active replica, whose ISR becomes itself and which
// recovers (KIP-704); ELIGIBLE_LEADERS_NOT_AVAILABLE if no replica is
// active.
func (b *batch) electOne(t *metadata.Topic, p *metadata.Partition, typ int8) error {
	im := b.tx.im
	switch typ {
	case metadata.ElectPreferred:
		if len(p.Replicas) == 0 {
			return kerr.PreferredLeaderNotAvailable
		}
		pref := p.Replicas[0]
		if p.Leader == pref {
			return kerr.ElectionNotNeeded
		}
		if !has(p.ISR, pref) || !isActiveBroker(im, pref) {
			return fmt.Errorf("%w: the preferred leader %d is not an active member of the ISR %v", kerr.PreferredLeaderNotAvailable, pref, p.ISR)
		}
		b.change(t, p, pref, p.ISR, p.Recovering)
		return nil
	case metadata.ElectUnclean:
		if p.Leader != noLeader {
			return kerr.ElectionNotNeeded
		}
		for _, r := range p.Replicas {
			if has(p.ISR, r) && isActiveBroker(im, r) {
				b.change(t, p, r, p.ISR, p.Recovering)
				return nil
			}
		}
		for _, r := range p.Replicas {
			if isActiveBroker(im, r) {
				b.change(t, p, r, []int32{r}, true)
				return nil
			}
		}
		return fmt.Errorf("%w: no replica of %v is active", kerr.EligibleLeadersNotAvailable, p.Replicas)
	}
	return fmt.Errorf("%w: unknown election type %d", kerr.InvalidRequest, typ)
}

// electLeaders is ElectLeaders (ReplicationControlManager.electLeaders): a
// non-atomic decision (ControllerResult.of), so it may span entries. With
// no partitions named it tries every partition and leaves out those
// answered ELECTION_NOT_NEEDED.
func (a *active) electLeaders(ctx context.Context, body []byte) (any, int64, error) {
	var in electReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	if in.Type != metadata.ElectPreferred && in.Type != metadata.ElectUnclean {
		return nil, 0, fmt.Errorf("%w: unknown election type %d", kerr.InvalidRequest, in.Type)
	}
	var resp partResults
	off, err := a.decideAdmin(ctx, decideOpts{split: true}, func(im *metadata.Image, b *batch) error {
		resp.Results = resp.Results[:0]
		if in.Parts == nil {
			b.forEachPartition(func(t *metadata.Topic, p *metadata.Partition) {
				if err := b.electOne(t, p, in.Type); !errors.Is(err, kerr.ElectionNotNeeded) {
					resp.Results = append(resp.Results, resultOf(t.Name, p.Index, err))
				}
			})
			return nil
		}
		for _, tp := range in.Parts {
			t, p, err := partitionOf(b.tx.im, tp.Topic, tp.Partition)
			if err == nil {
				err = b.electOne(t, p, in.Type)
			}
			resp.Results = append(resp.Results, resultOf(tp.Topic, tp.Partition, err))
		}
		return nil
	})
	return resp, off, err
}

// completeReassignment is PartitionChangeBuilder.completeReassignmentIfNeeded
// for a change of p to (leader, isr): once isr holds every target replica,
// the replicas become the target, the ISR loses the removing replicas, and
// a leader outside the target is replaced by the first target replica in
// the new ISR that is active (none: no leader). Otherwise it returns its
// arguments and a nil assignment.
func completeReassignment(im *metadata.Image, p *metadata.Partition, leader int32, isr []int32) (int32, []int32, *assignment) {
	target := p.TargetReplicas()
	for _, r := range target {
		if !has(isr, r) {
			return leader, isr, nil
		}
	}
	newISR := slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return !has(target, r) })
	if len(newISR) == 0 {
		return leader, isr, nil
	}
	if !has(newISR, leader) {
		leader = firstActive(im, target, newISR)
	}
	return leader, newISR, &assignment{Replicas: target}
}

// firstActive is the first of order that is in isr and active, or noLeader.
func firstActive(im *metadata.Image, order, isr []int32) int32 {
	for _, r := range order {
		if has(isr, r) && isActiveBroker(im, r) {
			return r
		}
	}
	return noLeader
}

// reassignOne starts, replaces or cancels one partition's reassignment
// (ReplicationControlManager.changePartitionReassignment and
// cancelPartitionReassignment). A new target on a partition already being
// reassigned starts from the reverted state, as Kafka does. A target that
// the ISR already covers (e.g. dropping a replica) completes at once.
func (b *batch) reassignOne(it metadata.Reassignment) error {
	im := b.tx.im
	t, p, err := partitionOf(im, it.Topic, it.Partition)
	if err != nil {
		return err
	}
	if it.Replicas == nil {
		if !p.Reassigning() {
			return kerr.NoReassignmentInProgress
		}
		reps, isr, unclean := p.OriginalReplicas()
		leader := p.Leader
		if !has(isr, leader) || !isActiveBroker(im, leader) {
			leader = firstActive(im, reps, isr)
		}
		b.changeAssign(t, p, leader, isr, p.Recovering || unclean, &assignment{Replicas: reps})
		return nil
	}
	if err := metadata.ValidateTargetReplicas(im, it.Replicas); err != nil {
		return err
	}
	current, isr, recovering := p.Replicas, p.ISR, p.Recovering
	if p.Reassigning() {
		var unclean bool
		current, isr, unclean = p.OriginalReplicas()
		recovering = recovering || unclean
	}
	reps, adding, removing := metadata.MergeReassignment(current, it.Replicas)
	next := metadata.Partition{Replicas: reps, AddingReplicas: adding, RemovingReplicas: removing}
	leader := p.Leader
	if !has(reps, leader) || !has(isr, leader) {
		leader = firstActive(im, reps, isr)
	}
	if l, i, asg := completeReassignment(im, &next, leader, isr); asg != nil {
		b.changeAssign(t, p, l, i, recovering, asg)
		return nil
	}
	b.changeAssign(t, p, leader, isr, recovering, &assignment{Replicas: reps, Adding: adding, Removing: removing})
	return nil
}

// alterReassignments is AlterPartitionReassignments: every item is checked
// against the image as changed by the items before it; the valid ones are
// written together (an atomic decision: at most one PartitionChange per
// item).
func (a *active) alterReassignments(ctx context.Context, body []byte) (any, int64, error) {
	var in reassignReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	var resp partResults
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		resp.Results = resp.Results[:0]
		for _, it := range in.Items {
			resp.Results = append(resp.Results, resultOf(it.Topic, it.Partition, b.reassignOne(it)))
		}
		return nil
	})
	return resp, off, err
}

// ElectLeaders implements metadata.LeaderElector through the active
// controller.
func (n *Node) ElectLeaders(ctx context.Context, typ int8, parts []metadata.TopicPartition) ([]metadata.PartitionResult, error) {
	var resp partResults
	if err := n.write(ctx, opElectLeaders, electReq{Type: typ, Parts: parts}, &resp); err != nil {
		return nil, err
	}
	if parts != nil && len(resp.Results) != len(parts) {
		return nil, fmt.Errorf("%w: ElectLeaders: %d results for %d partitions", kerr.UnknownServerError, len(resp.Results), len(parts))
	}
	return resp.Results, nil
}

// AlterPartitionReassignments implements metadata.Reassigner through the
// active controller.
func (n *Node) AlterPartitionReassignments(ctx context.Context, items []metadata.Reassignment) ([]metadata.PartitionResult, error) {
	var resp partResults
	if err := n.write(ctx, opAlterReassignments, reassignReq{Items: items}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(items) {
		return nil, fmt.Errorf("%w: AlterPartitionReassignments: %d results for %d partitions", kerr.UnknownServerError, len(resp.Results), len(items))
	}
	return resp.Results, nil
}
