package share

import (
	"bytes"
	"maps"
	"slices"

	"github.com/sluice-io/sluice/internal/group/consumer"
)

// Assignment is a set of partitions by topic; each slice is sorted and
// non-empty.
type Assignment = consumer.Assignment

// TP is one topic partition.
type TP = consumer.TP

// Special member epochs of the ShareGroupHeartbeat request.
const (
	JoinEpoch  int32 = 0  // joining or rejoining
	LeaveEpoch int32 = -1 // leaving
)

// Member is one member of a share group (Kafka's ShareGroupMember). An
// empty RackID means none.
type Member struct {
	ID                   string
	RackID               string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string

	Epoch         int32
	PreviousEpoch int32
	Assigned      Assignment
}

func (m *Member) clone() *Member {
	c := *m
	c.SubscribedTopicNames = slices.Clone(m.SubscribedTopicNames)
	c.Assigned = m.Assigned.Clone()
	return &c
}

// StatePartitions are the share partitions of a group whose durable state
// exists or is being deleted (Kafka's ShareGroupStatePartitionMetadata):
// by topic id, the topic's name and partitions.
type StatePartitions struct {
	Initialized map[TopicID]TopicPartitions
	Deleting    map[TopicID]string
}

// TopicPartitions is a topic's name and some of its partitions.
type TopicPartitions struct {
	Name       string
	Partitions []int32
}

// Group is a share group's state: what its records hold.
type Group struct {
	ID              string
	Epoch           int32
	AssignmentEpoch int32
	// MetadataHash is the hash of the subscribed topics' metadata as of
	// the last epoch bump (KIP-1101).
	MetadataHash int64
	Members      map[string]*Member
	// Target is each member's partitions in the target assignment.
	Target map[string]Assignment
	// Partitions lists the share partitions whose state was initialized.
	Partitions StatePartitions

	// imageVersion is the metadata version the subscription was last
	// checked against (not persisted: a loaded group re-checks).
	imageVersion int64
}

func newGroup(id string) *Group {
	return &Group{
		ID:           id,
		Members:      map[string]*Member{},
		Target:       map[string]Assignment{},
		Partitions:   StatePartitions{Initialized: map[TopicID]TopicPartitions{}, Deleting: map[TopicID]string{}},
		imageVersion: -1,
	}
}

func (g *Group) clone() *Group {
	c := *g
	c.Members = make(map[string]*Member, len(g.Members))
	for id, m := range g.Members {
		c.Members[id] = m.clone()
	}
	c.Target = make(map[string]Assignment, len(g.Target))
	for id, a := range g.Target {
		c.Target[id] = a.Clone()
	}
	c.Partitions = g.Partitions.clone()
	return &c
}

func (s StatePartitions) clone() StatePartitions {
	out := StatePartitions{Initialized: make(map[TopicID]TopicPartitions, len(s.Initialized)), Deleting: maps.Clone(s.Deleting)}
	for id, t := range s.Initialized {
		t.Partitions = slices.Clone(t.Partitions)
		out.Initialized[id] = t
	}
	if out.Deleting == nil {
		out.Deleting = map[TopicID]string{}
	}
	return out
}

func (s StatePartitions) equal(o StatePartitions) bool {
	return maps.EqualFunc(s.Initialized, o.Initialized, func(a, b TopicPartitions) bool {
		return a.Name == b.Name && slices.Equal(a.Partitions, b.Partitions)
	}) && maps.Equal(s.Deleting, o.Deleting)
}

// Group states, as ShareGroupDescribe and ListGroups name them (Kafka's
// ShareGroup.ShareGroupState).
const (
	StateEmpty  = "Empty"
	StateStable = "Stable"
	StateDead   = "Dead"
)

// State is the group's state: Empty without members, else Stable (a
// share group has no reconciliation to wait for).
func (g *Group) State() string {
	if len(g.Members) == 0 {
		return StateEmpty
	}
	return StateStable
}

// SortedMembers returns the group's members by member id.
func (g *Group) SortedMembers() []*Member {
	out := make([]*Member, 0, len(g.Members))
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		out = append(out, g.Members[id])
	}
	return out
}

// SharePartition is one partition a share group has state for.
type SharePartition struct {
	TopicID   TopicID
	Topic     string
	Partition int32
}

// StatePartitionList lists the partitions whose share state the group
// initialized, sorted: those a deletion of the group removes from the
// share coordinator.
func (g *Group) StatePartitionList() []SharePartition {
	var out []SharePartition
	for id, t := range g.Partitions.Initialized {
		for _, p := range t.Partitions {
			out = append(out, SharePartition{TopicID: id, Topic: t.Name, Partition: p})
		}
	}
	slices.SortFunc(out, func(a, b SharePartition) int {
		if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// assignmentOf builds an Assignment from partitions in any order.
func assignmentOf(tps []TP) Assignment {
	out := Assignment{}
	for _, tp := range tps {
		out[tp.Topic] = append(out[tp.Topic], tp.Partition)
	}
	for t, ps := range out {
		slices.Sort(ps)
		out[t] = slices.Compact(ps)
	}
	return out
}

// topicPartitions is an assignment's record form, sorted by topic id.
func topicPartitions(a Assignment) []TopicPartitionsValue {
	var out []TopicPartitionsValue
	for t, ps := range a {
		out = append(out, TopicPartitionsValue{TopicID: t, Partitions: slices.Clone(ps)})
	}
	slices.SortFunc(out, func(x, y TopicPartitionsValue) int { return bytes.Compare(x.TopicID[:], y.TopicID[:]) })
	return out
}

func fromTopicPartitions(tps []TopicPartitionsValue) Assignment {
	var all []TP
	for _, tp := range tps {
		for _, p := range tp.Partitions {
			all = append(all, TP{Topic: tp.TopicID, Partition: p})
		}
	}
	return assignmentOf(all)
}
