package share

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroup answers one group of a ShareGroupDescribe (Kafka's
// ShareGroup.asDescribedGroup): the state, epochs, assignor and each
// member with its subscription and current assignment, topics named from
// img. An unknown group is GROUP_ID_NOT_FOUND.
func (mgr *Manager) DescribeGroup(img *Image, id string) kmsg.ShareGroupDescribeResponseGroup {
	out := kmsg.NewShareGroupDescribeResponseGroup()
	out.GroupID = id
	g := mgr.groups[id]
	if g == nil {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "Group " + id + " not found."
		out.ErrorMessage = &msg
		return out
	}
	names := make(map[TopicID]string, len(img.Topics))
	for name, t := range img.Topics {
		names[t.ID] = name
	}
	out.GroupState = g.State()
	out.GroupEpoch = g.Epoch
	out.AssignmentEpoch = g.AssignmentEpoch
	out.Assignor = mgr.cfg.Assignor.Name()
	for _, m := range g.SortedMembers() {
		rm := kmsg.NewShareGroupDescribeResponseGroupMember()
		rm.MemberID = m.ID
		rm.RackID = ptr(m.RackID)
		rm.MemberEpoch = m.Epoch
		rm.ClientID, rm.ClientHost = m.ClientID, m.ClientHost
		rm.SubscribedTopicNames = append([]string{}, m.SubscribedTopicNames...)
		for _, tp := range topicPartitions(m.Assigned) {
			name, ok := names[tp.TopicID]
			if !ok {
				continue
			}
			at := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			at.TopicID, at.Topic, at.Partitions = tp.TopicID, name, tp.Partitions
			rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, at)
		}
		out.Members = append(out.Members, rm)
	}
	return out
}
