package group

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Summary is one group as the status pages show it: its state machine's
// state, members and committed offsets, read on its shard's owner.
type Summary struct {
	ID string `json:"id"`
	// Type is classic, consumer for a KIP-848 consumer group or share for
	// a KIP-932 share group; those two also have their group epoch,
	// assignment epoch and assignor.
	Type            string `json:"type"`
	GroupEpoch      int32  `json:"groupEpoch,omitempty"`
	AssignmentEpoch int32  `json:"assignmentEpoch,omitempty"`
	Assignor        string `json:"assignor,omitempty"`
	State           string `json:"state"`
	ProtocolType    string `json:"protocolType"`
	Protocol        string `json:"protocol"`
	Generation      int32  `json:"generation"`
	// StateSinceMs is when the group entered its state (Unix ms).
	StateSinceMs int64             `json:"stateSinceMs"`
	Members      []MemberSummary   `json:"members"`
	Offsets      []CommittedOffset `json:"offsets"`
}

// MemberSummary is one member of a group and, for the consumer protocol,
// the partitions its assignment gives it.
type MemberSummary struct {
	ID         string           `json:"id"`
	ClientID   string           `json:"clientId"`
	ClientHost string           `json:"clientHost"`
	Assigned   []TopicPartition `json:"assigned,omitempty"`
	// MemberEpoch and Target are a consumer group member's epoch and its
	// partitions in the target assignment.
	MemberEpoch int32            `json:"memberEpoch,omitempty"`
	Target      []TopicPartition `json:"target,omitempty"`
}

// CommittedOffset is a group's committed offset of one partition.
type CommittedOffset struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	Offset       int64  `json:"offset"`
	CommitTimeMs int64  `json:"commitTimeMs"`
}

// Summaries returns every group this node coordinates (the groups of the
// __consumer_offsets partitions it leads and has loaded), sorted by id.
func (c *Coordinator) Summaries() []Summary {
	var out []Summary
	c.forEachShard(func(s *shard) {
		mgr := s.State().consumers
		for _, g := range s.State().groups {
			if cg := mgr.Group(g.id); cg != nil {
				out = append(out, c.consumerSummary(cg, g))
				continue
			}
			out = append(out, g.summary())
		}
		for _, id := range mgr.Groups() {
			if s.State().groups[id] == nil {
				out = append(out, c.consumerSummary(mgr.Group(id), nil))
			}
		}
		shares := s.State().shares
		for _, id := range shares.Groups() {
			if s.State().groups[id] == nil {
				out = append(out, c.shareSummary(shares, shares.Group(id)))
			}
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// summary builds the group's Summary (on its shard's owner).
func (g *Group) summary() Summary {
	s := Summary{ID: g.id, Type: "classic", State: g.state.String(), ProtocolType: g.protocolType, Protocol: g.protocol,
		Generation: g.generation, StateSinceMs: unixMs(g.stateSince), Members: []MemberSummary{}, Offsets: []CommittedOffset{}}
	for _, m := range g.sortedMembers() {
		ms := MemberSummary{ID: m.id, ClientID: m.clientID, ClientHost: m.clientHost}
		if g.protocolType == "consumer" && len(m.assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if a.ReadFrom(m.assignment) == nil {
				for _, t := range a.Topics {
					for _, p := range t.Partitions {
						ms.Assigned = append(ms.Assigned, TopicPartition{Topic: t.Topic, Partition: p})
					}
				}
			}
		}
		s.Members = append(s.Members, ms)
	}
	s.Offsets = g.offsetSummaries()
	return s
}

// offsetSummaries lists g's committed offsets by topic and partition.
func (g *Group) offsetSummaries() []CommittedOffset {
	out := []CommittedOffset{}
	for tp, o := range g.offsets {
		out = append(out, CommittedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: o.Offset, CommitTimeMs: unixMs(o.CommitTime)})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// unixMs is t in Unix milliseconds, 0 for the zero time.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// WaitingSync returns how many members of group have a SyncGroup waiting
// for the leader's assignment (0 if this node does not coordinate the
// group). Tests use it to know that a follower's SyncGroup has arrived
// and is parked, rather than sleeping and hoping it has.
func (c *Coordinator) WaitingSync(group string) int {
	n := 0
	c.run(group, func(s *shard) {
		g := s.State().groups[group]
		if g == nil {
			return
		}
		for _, m := range g.members {
			if m.syncWait != nil {
				n++
			}
		}
	})
	return n
}
