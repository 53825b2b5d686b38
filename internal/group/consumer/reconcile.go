package consumer

// reconcile moves a member towards its target assignment, as Kafka's
// CurrentAssignmentBuilder: partitions leave the member before new ones
// arrive, and a partition is given only once no other member's epoch
// holds it (revoke before assign). owned is what the member says it owns
// (nil: not said).
func reconcile(m *Member, targetEpoch int32, target Assignment, partitionEpoch func(TP) int32, owned Assignment) *Member {
	switch m.State {
	case MemberStable:
		if m.Epoch == targetEpoch {
			return m
		}
		return nextAssignment(m, m.Epoch, targetEpoch, target, partitionEpoch, owned)
	case MemberUnrevokedPartitions:
		// The member moves on only once it no longer reports the
		// partitions it had to revoke.
		if ownsAny(owned, m.PendingRevocation) {
			return m
		}
		return nextAssignment(m, m.Epoch+1, targetEpoch, target, partitionEpoch, owned)
	case MemberUnreleasedPartitions:
		return nextAssignment(m, m.Epoch, targetEpoch, target, partitionEpoch, owned)
	}
	// An unknown state (written by a newer coordinator) starts the member
	// over at the target epoch; Kafka first fences a member that reports
	// owning partitions, which this does not.
	return nextAssignment(m, targetEpoch, targetEpoch, target, partitionEpoch, owned)
}

// ownsAny reports whether owned (nil: unknown, so assumed yes) holds any
// partition of revoke.
func ownsAny(owned, revoke Assignment) bool {
	if owned == nil {
		return true
	}
	return owned.intersect(revoke).Count() > 0
}

// nextAssignment is CurrentAssignmentBuilder.computeNextAssignment.
func nextAssignment(m *Member, memberEpoch, targetEpoch int32, target Assignment, partitionEpoch func(TP) int32, owned Assignment) *Member {
	if target == nil {
		target = Assignment{}
	}
	// Kept: what the member has and the target still gives it.
	kept := m.Assigned.intersect(target)
	revoke := m.Assigned.minus(kept)
	// To assign: the target's other partitions that no one holds.
	unreleased := false
	var add []TP
	for _, tp := range target.minus(kept).TPs() {
		if partitionEpoch(tp) != -1 {
			unreleased = true
			continue
		}
		add = append(add, tp)
	}
	next := m.clone()
	switch {
	case revoke.Count() > 0 && ownsAny(owned, revoke):
		// Revoke first: the member stays at its epoch (the one it is
		// moving from) until it stops reporting these partitions.
		next.State = MemberUnrevokedPartitions
		next.setEpoch(memberEpoch)
		next.Assigned = kept
		next.PendingRevocation = revoke
	case len(add) > 0:
		next.State = MemberStable
		if unreleased {
			next.State = MemberUnreleasedPartitions
		}
		next.setEpoch(targetEpoch)
		next.Assigned = kept.union(assignmentOf(add))
		next.PendingRevocation = Assignment{}
	case unreleased:
		next.State = MemberUnreleasedPartitions
		next.setEpoch(targetEpoch)
		next.Assigned = kept
		next.PendingRevocation = Assignment{}
	default:
		next.State = MemberStable
		next.setEpoch(targetEpoch)
		next.Assigned = kept
		next.PendingRevocation = Assignment{}
	}
	return next
}

// setEpoch is ConsumerGroupMember.Builder.updateMemberEpoch: the previous
// epoch becomes the current one, even when the epoch does not change.
func (m *Member) setEpoch(e int32) {
	m.PreviousEpoch, m.Epoch = m.Epoch, e
}
