package share

import (
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leave handles member epoch -1 (Kafka's shareGroupLeave).
func (mgr *Manager) leave(img *Image, req *kmsg.ShareGroupHeartbeatRequest) (*kmsg.ShareGroupHeartbeatResponse, Result, *Error) {
	g := mgr.groups[req.GroupID]
	if g == nil {
		return nil, Result{}, errf(kerr.GroupIDNotFound, "Share group %s not found.", req.GroupID)
	}
	m := g.Members[req.MemberID]
	if m == nil {
		return nil, Result{}, errf(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.ID)
	}
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	id := req.MemberID
	resp.MemberID = &id
	resp.MemberEpoch = LeaveEpoch
	return resp, mgr.fence(g, m, img), nil
}

// fence removes a member and bumps the group epoch (Kafka's
// shareGroupFenceMember); the next heartbeat of another member computes
// the new target assignment.
func (mgr *Manager) fence(g *Group, m *Member, img *Image) Result {
	records := removeMemberRecords(g.ID, m.ID)
	members := maps.Clone(g.Members)
	delete(members, m.ID)
	records = append(records, Record{Key{Type: TypeGroupMetadata, Group: g.ID},
		&GroupMetadataValue{Epoch: g.Epoch + 1, MetadataHash: metadataHash(members, img)}})
	mgr.apply(records)
	return Result{Records: records, Timers: []Timer{{Group: g.ID, Member: m.ID, Cancel: true}}}
}

// Expire applies a session timer that fired: the member is fenced if it
// is still in the group.
func (mgr *Manager) Expire(img *Image, t Timer) Result {
	g := mgr.groups[t.Group]
	if g == nil {
		return Result{}
	}
	m := g.Members[t.Member]
	if m == nil {
		return Result{}
	}
	return mgr.fence(g, m, img)
}

// LoadedTimers are the timers to schedule once a partition's groups are
// loaded (Kafka's onLoaded): a session timeout for every member.
func (mgr *Manager) LoadedTimers(now time.Time) []Timer {
	var out []Timer
	for _, gid := range mgr.Groups() {
		g := mgr.groups[gid]
		session := mgr.settings(gid).SessionTimeout
		for _, id := range slices.Sorted(maps.Keys(g.Members)) {
			out = append(out, Timer{Group: gid, Member: id, At: now.Add(session)})
		}
	}
	return out
}

// DeleteGroup returns the tombstones deleting an empty group (Kafka's
// ShareGroup.createGroupTombstoneRecords), applied, and the share
// partitions whose state the caller deletes from the share coordinator; a
// group with members is NON_EMPTY_GROUP, an unknown one
// GROUP_ID_NOT_FOUND.
func (mgr *Manager) DeleteGroup(id string) ([]Record, []SharePartition, *Error) {
	g := mgr.groups[id]
	if g == nil {
		return nil, nil, errf(kerr.GroupIDNotFound, "Group %s not found.", id)
	}
	if len(g.Members) > 0 {
		return nil, nil, errf(kerr.NonEmptyGroup, "Group %s is not empty.", id)
	}
	parts := g.StatePartitionList()
	var records []Record
	for _, t := range slices.Sorted(maps.Keys(g.Target)) {
		records = append(records, Record{Key: Key{Type: TypeTargetAssignmentMember, Group: id, Member: t}})
	}
	records = append(records,
		Record{Key: Key{Type: TypeTargetAssignmentMetadata, Group: id}},
		Record{Key: Key{Type: TypeStatePartitionMetadata, Group: id}},
		Record{Key: Key{Type: TypeGroupMetadata, Group: id}})
	mgr.apply(records)
	return records, parts, nil
}
