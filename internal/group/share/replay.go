package share

import (
	"fmt"
	"slices"
)

// Replay applies one record to the groups (Kafka's GroupMetadataManager
// replay methods for share groups). The heartbeat, expiry and deletion
// paths change state only by producing records and replaying them, so
// loading a partition's records into an empty Manager rebuilds the same
// groups.
func (mgr *Manager) Replay(rec Record) error {
	k := rec.Key
	g := mgr.groups[k.Group]
	if g == nil {
		if rec.Value == nil {
			return nil // a tombstone for a group already gone
		}
		g = newGroup(k.Group)
		mgr.groups[k.Group] = g
	}
	switch v := rec.Value.(type) {
	case nil:
		mgr.replayTombstone(g, k)
	case *GroupMetadataValue:
		g.Epoch, g.MetadataHash = v.Epoch, v.MetadataHash
	case *MemberMetadataValue:
		m := g.member(k.Member)
		m.RackID = deref(v.RackID)
		m.ClientID = v.ClientID
		m.ClientHost = v.ClientHost
		m.SubscribedTopicNames = nilIfEmpty(v.SubscribedTopicNames)
	case *TargetAssignmentMetadataValue:
		g.AssignmentEpoch = v.AssignmentEpoch
	case *TargetAssignmentMemberValue:
		g.Target[k.Member] = fromTopicPartitions(v.TopicPartitions)
	case *CurrentMemberAssignmentValue:
		// Kafka creates the member here too: records of one member may
		// be compacted in any order.
		m := g.member(k.Member)
		m.Epoch = v.MemberEpoch
		m.PreviousEpoch = v.PreviousMemberEpoch
		m.Assigned = fromTopicPartitions(v.AssignedPartitions)
	case *StatePartitionMetadataValue:
		st := StatePartitions{Initialized: map[TopicID]TopicPartitions{}, Deleting: map[TopicID]string{}}
		// A partition still initializing may have state: a deletion
		// removes it too.
		for _, list := range [][]TopicPartitionsInfo{v.InitializingTopics, v.InitializedTopics} {
			for _, t := range list {
				cur := st.Initialized[t.TopicID]
				cur.Name = t.TopicName
				cur.Partitions = append(cur.Partitions, t.Partitions...)
				slices.Sort(cur.Partitions)
				cur.Partitions = slices.Compact(cur.Partitions)
				st.Initialized[t.TopicID] = cur
			}
		}
		for _, t := range v.DeletingTopics {
			st.Deleting[t.TopicID] = t.TopicName
		}
		g.Partitions = st
	default:
		return fmt.Errorf("share: replay of %T", v)
	}
	return nil
}

// member returns member id, created empty if it does not exist.
func (g *Group) member(id string) *Member {
	m := g.Members[id]
	if m == nil {
		m = &Member{ID: id, Assigned: Assignment{}}
		g.Members[id] = m
	}
	return m
}

func (mgr *Manager) replayTombstone(g *Group, k Key) {
	switch k.Type {
	case TypeGroupMetadata:
		delete(mgr.groups, g.ID)
	case TypeMemberMetadata:
		delete(g.Members, k.Member)
	case TypeTargetAssignmentMetadata:
		g.AssignmentEpoch = 0
	case TypeTargetAssignmentMember:
		delete(g.Target, k.Member)
	case TypeCurrentMemberAssignment:
		if m := g.Members[k.Member]; m != nil {
			m.Epoch, m.PreviousEpoch, m.Assigned = LeaveEpoch, LeaveEpoch, Assignment{}
		}
	case TypeStatePartitionMetadata:
		g.Partitions = StatePartitions{Initialized: map[TopicID]TopicPartitions{}, Deleting: map[TopicID]string{}}
	}
}

// nilIfEmpty copies s, an empty list as nil, so replayed and decoded
// records give equal states.
func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
