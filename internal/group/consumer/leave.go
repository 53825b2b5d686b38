package consumer

import (
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leave handles member epochs -1 and -2 (Kafka's consumerGroupLeave).
func (mgr *Manager) leave(img *Image, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, Result, *Error) {
	g := mgr.groups[req.Group]
	if g == nil {
		return nil, Result{}, errf(kerr.GroupIDNotFound, "Consumer group %s not found.", req.Group)
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	memberID := req.MemberID
	resp.MemberID = &memberID
	resp.MemberEpoch = req.MemberEpoch
	var m *Member
	if req.InstanceID == nil {
		m = g.Members[req.MemberID]
		if m == nil {
			return nil, Result{}, errf(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.ID)
		}
	} else {
		m = g.staticMember(*req.InstanceID)
		if m == nil {
			return nil, Result{}, errf(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		}
		if m.ID != req.MemberID {
			return nil, Result{}, errf(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, m.ID)
		}
		if req.MemberEpoch == StaticLeaveEpoch {
			// A static member leaving for a while keeps its assignment
			// under epoch -2 until the same instance rejoins or its
			// session expires.
			left := m.clone()
			left.Epoch = StaticLeaveEpoch
			left.PendingRevocation = Assignment{}
			res := Result{Records: []Record{currentAssignmentRecord(g.ID, left)}}
			mgr.apply(res.Records)
			return resp, res, nil
		}
	}
	return resp, mgr.fence(g, m, img), nil
}

// fence removes a member and bumps the group epoch (Kafka's
// consumerGroupFenceMember); the next heartbeat computes the new target
// assignment. If m was the last consumer-protocol member of a group of
// classic members, the group is deleted instead and Result.Downgrade
// holds the classic group to create.
func (mgr *Manager) fence(g *Group, m *Member, img *Image) Result {
	if mgr.downgradeOnFence(g, m) {
		return mgr.downgrade(g, m, img)
	}
	records := removeMemberRecords(g.ID, m.ID)
	members := maps.Clone(g.Members)
	delete(members, m.ID)
	if re := m.SubscribedTopicRegex; re != "" {
		still := false
		for _, o := range members {
			still = still || o.SubscribedTopicRegex == re
		}
		if _, ok := g.Regexes[re]; ok && !still {
			records = append(records, Record{Key: Key{Type: TypeRegularExpression, Group: g.ID, Regex: re}})
		}
	}
	sub := subscriptionOf(members, g.Regexes, img)
	if !maps.Equal(sub, g.Subscription) {
		records = append(records, partitionMetadataRecord(g.ID, sub))
	}
	records = append(records, Record{Key{Type: TypeGroupMetadata, Group: g.ID}, &GroupMetadataValue{Epoch: g.Epoch + 1}})
	mgr.apply(records)
	if ng := mgr.groups[g.ID]; ng != nil {
		ng.imageVersion = img.Version
	}
	return Result{Records: records, Timers: cancelTimers(g.ID, m.ID)}
}

// Expire applies a timer that fired (Kafka's session, rebalance, join and
// sync timeout operations): the member is fenced if the timer still
// applies. A rebalance timer applies only while the member is still at
// the timer's epoch with partitions to revoke; a join or sync timer
// whenever the member is still there (it is cancelled when the member
// joins or syncs). A regex timer resolves the group's regular
// expressions (refreshRegexes).
func (mgr *Manager) Expire(now time.Time, img *Image, t Timer) Result {
	g := mgr.groups[t.Group]
	if g == nil {
		return Result{}
	}
	if t.Kind == RegexTimer {
		return mgr.refreshRegexes(now, img, g, t.CanDescribe)
	}
	m := g.Members[t.Member]
	if m == nil {
		return Result{}
	}
	if t.Kind == RebalanceTimer && (m.State != MemberUnrevokedPartitions || m.Epoch != t.Epoch) {
		return Result{}
	}
	return mgr.fence(g, m, img)
}

// LoadedTimers are the timers to schedule once a partition's groups are
// loaded (Kafka's onLoaded): a session timeout for every member, and a
// rebalance timeout for every member with partitions to revoke.
func (mgr *Manager) LoadedTimers(now time.Time) []Timer {
	var out []Timer
	for _, gid := range mgr.Groups() {
		g := mgr.groups[gid]
		for _, id := range slices.Sorted(maps.Keys(g.Members)) {
			m := g.Members[id]
			out = append(out, Timer{Kind: SessionTimer, Group: gid, Member: id, At: now.Add(mgr.sessionOf(gid, m))})
			if m.State == MemberUnrevokedPartitions {
				out = append(out, Timer{Kind: RebalanceTimer, Group: gid, Member: id, Epoch: m.Epoch,
					At: now.Add(time.Duration(m.RebalanceTimeoutMs) * time.Millisecond)})
			}
		}
	}
	return out
}

// DeleteGroup returns the tombstones deleting an empty group (Kafka's
// ConsumerGroup.createGroupTombstoneRecords), applied; a group with
// members is GROUP_NOT_EMPTY, an unknown one GROUP_ID_NOT_FOUND.
func (mgr *Manager) DeleteGroup(id string) ([]Record, *Error) {
	g := mgr.groups[id]
	if g == nil {
		return nil, errf(kerr.GroupIDNotFound, "Group %s not found.", id)
	}
	if len(g.Members) > 0 {
		return nil, errf(kerr.NonEmptyGroup, "Group %s is not empty.", id)
	}
	var records []Record
	for _, t := range slices.Sorted(maps.Keys(g.Target)) {
		records = append(records, Record{Key: Key{Type: TypeTargetAssignmentMember, Group: id, Member: t}})
	}
	records = append(records, Record{Key: Key{Type: TypeTargetAssignmentMetadata, Group: id}})
	for _, re := range slices.Sorted(maps.Keys(g.Regexes)) {
		records = append(records, Record{Key: Key{Type: TypeRegularExpression, Group: id, Regex: re}})
	}
	records = append(records,
		Record{Key: Key{Type: TypePartitionMetadata, Group: id}},
		Record{Key: Key{Type: TypeGroupMetadata, Group: id}})
	mgr.apply(records)
	return records, nil
}
