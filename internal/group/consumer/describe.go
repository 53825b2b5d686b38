package consumer

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Describe answers ConsumerGroupDescribe (v0-v1) from the state (Kafka's
// GroupMetadataManager.consumerGroupDescribe): the group's state, epochs
// and assignor, and each member's current and target assignment with
// topic names from img. A group this manager does not hold is
// GROUP_ID_NOT_FOUND; the caller answers for groups of other types.
func (mgr *Manager) Describe(img *Image, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, mgr.DescribeGroup(img, id, req.Version))
	}
	return resp
}

// DescribeGroup is one group of a ConsumerGroupDescribe answer.
func (mgr *Manager) DescribeGroup(img *Image, id string, version int16) kmsg.ConsumerGroupDescribeResponseGroup {
	out := kmsg.NewConsumerGroupDescribeResponseGroup()
	out.Group = id
	g := mgr.groups[id]
	if g == nil {
		msg := "Group " + id + " not found."
		out.ErrorCode, out.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
		return out
	}
	out.State = g.State()
	out.Epoch = g.Epoch
	out.AssignmentEpoch = g.AssignmentEpoch
	out.AssignorName = g.PreferredAssignor(mgr.cfg.Assignors[0].Name())
	for _, mid := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.ID
		dm.InstanceID = ptr(m.InstanceID)
		dm.RackID = ptr(m.RackID)
		dm.MemberEpoch = m.Epoch
		dm.ClientID = m.ClientID
		dm.ClientHost = m.ClientHost
		dm.SubscribedTopics = slices.Clone(m.SubscribedTopicNames)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		dm.SubscribedTopicRegex = ptr(m.SubscribedTopicRegex)
		dm.Assignment = describeAssignment(img, m.Assigned)
		dm.TargetAssignment = describeAssignment(img, g.Target[mid])
		if version >= 1 {
			dm.MemberType = 1 // a consumer-protocol member
		}
		out.Members = append(out.Members, dm)
	}
	return out
}

// describeAssignment names a's topics; partitions of topics no longer in
// img are left out, as Kafka does.
func describeAssignment(img *Image, a Assignment) kmsg.Assignment {
	out := kmsg.NewAssignment()
	for _, tp := range a.toTopicPartitions() {
		name, ok := img.nameOf(tp.TopicID)
		if !ok {
			continue
		}
		t := kmsg.AssignmentTopicPartition{TopicID: tp.TopicID, Topic: name, Partitions: tp.Partitions}
		out.TopicPartitions = append(out.TopicPartitions, t)
	}
	return out
}

// ValidateOffsetCommit checks an OffsetCommit (v9+: member id and member
// epoch) or TxnOffsetCommit against a consumer group, as Kafka's
// ConsumerGroup.validateOffsetCommit: a commit with a negative epoch is
// accepted only while the group is empty (an admin or a consumer not
// using the group); otherwise the member must exist (UNKNOWN_MEMBER_ID)
// and be at the epoch given (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for a
// classic-protocol member, whose generation is its epoch). ok is false when the
// group is not a consumer group this manager holds.
func (mgr *Manager) ValidateOffsetCommit(group, memberID string, memberEpoch int32) (code int16, ok bool) {
	g := mgr.groups[group]
	if g == nil {
		return 0, false
	}
	if memberEpoch < 0 && len(g.Members) == 0 {
		return 0, true
	}
	m := g.Members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code, true
	}
	if memberEpoch != m.Epoch {
		if m.Classic != nil {
			// A classic-protocol member commits with its generation.
			return kerr.IllegalGeneration.Code, true
		}
		return kerr.StaleMemberEpoch.Code, true
	}
	return 0, true
}

// ValidateOffsetFetch checks an OffsetFetch v9+ naming a member, as
// Kafka's ConsumerGroup.validateOffsetFetch: without a member id and with
// a negative epoch (an admin) it is accepted; otherwise the member must
// exist and be at the epoch given.
func (mgr *Manager) ValidateOffsetFetch(group string, memberID *string, memberEpoch int32) (code int16, ok bool) {
	g := mgr.groups[group]
	if g == nil {
		return 0, false
	}
	if memberEpoch < 0 && memberID == nil {
		return 0, true
	}
	m := g.Members[deref(memberID)]
	if m == nil {
		return kerr.UnknownMemberID.Code, true
	}
	if memberEpoch != m.Epoch {
		return kerr.StaleMemberEpoch.Code, true
	}
	return 0, true
}
