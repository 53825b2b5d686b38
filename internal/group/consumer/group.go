package consumer

import (
	"maps"
	"slices"
)

// MemberState is a member's reconciliation state (Kafka's MemberState);
// the values are the ones stored in CurrentMemberAssignmentValue.State.
type MemberState int8

// Member states.
const (
	// MemberStable: the member owns its whole target assignment, or is
	// waiting for nothing.
	MemberStable MemberState = 0
	// MemberUnrevokedPartitions: the member must revoke
	// PendingRevocation before it moves to the next epoch.
	MemberUnrevokedPartitions MemberState = 1
	// MemberUnreleasedPartitions: the member is at the target epoch but
	// some of its target partitions are still owned by others.
	MemberUnreleasedPartitions MemberState = 2
)

// String is Kafka's name for the state.
func (s MemberState) String() string {
	switch s {
	case MemberStable:
		return "STABLE"
	case MemberUnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case MemberUnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// Special member epochs of the ConsumerGroupHeartbeat request.
const (
	JoinEpoch        int32 = 0  // joining or rejoining
	LeaveEpoch       int32 = -1 // leaving for good
	StaticLeaveEpoch int32 = -2 // a static member leaving temporarily
)

// Member is one member of a consumer group (Kafka's ConsumerGroupMember).
// Empty InstanceID, RackID, SubscribedTopicRegex and ServerAssignor mean
// none (Kafka refuses empty strings for them).
type Member struct {
	ID                   string
	InstanceID           string
	RackID               string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	ServerAssignor       string
	RebalanceTimeoutMs   int32
	// Classic is set for a member that speaks the classic protocol
	// (JoinGroup, SyncGroup, Heartbeat) inside the consumer group: its
	// session timeout and the protocols it sent in its last JoinGroup
	// (Kafka's ClassicMemberMetadata).
	Classic *ClassicMemberMetadata

	Epoch             int32
	PreviousEpoch     int32
	State             MemberState
	Assigned          Assignment
	PendingRevocation Assignment
}

// clone is a deep copy of m.
func (m *Member) clone() *Member {
	c := *m
	c.SubscribedTopicNames = slices.Clone(m.SubscribedTopicNames)
	c.Assigned = m.Assigned.Clone()
	c.PendingRevocation = m.PendingRevocation.Clone()
	c.Classic = m.Classic.clone()
	return &c
}

// reconciledTo reports whether m is stable at epoch (Kafka's
// isReconciledTo).
func (m *Member) reconciledTo(epoch int32) bool {
	return m.State == MemberStable && m.Epoch == epoch
}

// SubscribedTopic is one topic of the group's subscription metadata: a
// topic some member subscribes to (by name or regex) that exists.
type SubscribedTopic struct {
	ID         TopicID
	Name       string
	Partitions int32
}

// RegexResolution is what a subscribed regular expression matched.
type RegexResolution struct {
	Topics    []string
	Version   int64
	Timestamp int64
}

// Group is a consumer group's state: what its records hold, plus the
// partition epochs derived from the members' current assignments.
type Group struct {
	ID              string
	Epoch           int32
	AssignmentEpoch int32
	Members         map[string]*Member
	// Target is each member's partitions in the target assignment.
	Target map[string]Assignment
	// Subscription is the metadata of the subscribed topics, by name, as
	// of the last epoch bump.
	Subscription map[string]SubscribedTopic
	// Regexes are the resolved subscribed regular expressions.
	Regexes map[string]RegexResolution

	// partitionEpochs maps each partition a member owns or still has to
	// revoke to that member's epoch.
	partitionEpochs map[TP]int32
	// staticMembers maps instance ids to member ids.
	staticMembers map[string]string
	// imageVersion is the metadata version the subscription was last
	// checked against (not persisted: a loaded group re-checks).
	imageVersion int64
}

func newGroup(id string) *Group {
	return &Group{
		ID:              id,
		Members:         map[string]*Member{},
		Target:          map[string]Assignment{},
		Subscription:    map[string]SubscribedTopic{},
		Regexes:         map[string]RegexResolution{},
		partitionEpochs: map[TP]int32{},
		staticMembers:   map[string]string{},
		imageVersion:    -1,
	}
}

// Group states, as ConsumerGroupDescribe names them.
const (
	StateEmpty       = "Empty"
	StateAssigning   = "Assigning"
	StateReconciling = "Reconciling"
	StateStable      = "Stable"
)

// State is the group's state (Kafka's ConsumerGroup.ConsumerGroupState).
func (g *Group) State() string {
	if len(g.Members) == 0 {
		return StateEmpty
	}
	if g.Epoch > g.AssignmentEpoch {
		return StateAssigning
	}
	for _, m := range g.Members {
		if !m.reconciledTo(g.AssignmentEpoch) {
			return StateReconciling
		}
	}
	return StateStable
}

// SubscribedTo reports whether some member subscribes to topic, by name or
// through a resolved regular expression (Kafka's
// ConsumerGroup.isSubscribedToTopic, which OffsetDelete asks).
func (g *Group) SubscribedTo(topic string) bool {
	for _, m := range g.Members {
		if slices.Contains(m.SubscribedTopicNames, topic) {
			return true
		}
		if m.SubscribedTopicRegex != "" && slices.Contains(g.Regexes[m.SubscribedTopicRegex].Topics, topic) {
			return true
		}
	}
	return false
}

// staticMember returns the member holding instance id, or nil.
func (g *Group) staticMember(instance string) *Member {
	if id, ok := g.staticMembers[instance]; ok {
		return g.Members[id]
	}
	return nil
}

// partitionEpoch is the epoch of the member owning tp, -1 if free (Kafka's
// currentPartitionEpoch).
func (g *Group) partitionEpoch(tp TP) int32 {
	if e, ok := g.partitionEpochs[tp]; ok {
		return e
	}
	return -1
}

// PreferredAssignor is the server assignor most members ask for (ties to
// the name first in order), or def if none asks (Kafka's
// ConsumerGroup.computePreferredServerAssignor).
func (g *Group) PreferredAssignor(def string) string {
	counts := map[string]int{}
	for _, m := range g.Members {
		if m.ServerAssignor != "" {
			counts[m.ServerAssignor]++
		}
	}
	best := ""
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if best == "" || counts[name] > counts[best] {
			best = name
		}
	}
	if best == "" {
		return def
	}
	return best
}

// SortedMembers returns the group's members by member id.
func (g *Group) SortedMembers() []*Member {
	out := make([]*Member, 0, len(g.Members))
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		out = append(out, g.Members[id])
	}
	return out
}

// UsesClassic reports whether m speaks the classic protocol.
func (m *Member) UsesClassic() bool { return m.Classic != nil }

// clone is a deep copy of c (nil stays nil).
func (c *ClassicMemberMetadata) clone() *ClassicMemberMetadata {
	if c == nil {
		return nil
	}
	out := &ClassicMemberMetadata{SessionTimeoutMs: c.SessionTimeoutMs}
	for _, p := range c.SupportedProtocols {
		out.SupportedProtocols = append(out.SupportedProtocols, ClassicProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)})
	}
	return out
}

// equal compares two classic metadata (either may be nil).
func (c *ClassicMemberMetadata) equal(o *ClassicMemberMetadata) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.SessionTimeoutMs == o.SessionTimeoutMs && slices.EqualFunc(c.SupportedProtocols, o.SupportedProtocols,
		func(a, b ClassicProtocol) bool { return a.Name == b.Name && string(a.Metadata) == string(b.Metadata) })
}
