package consumer

import (
	"fmt"
	"maps"
	"slices"
)

// Replay applies one record to the groups (Kafka's GroupMetadataManager
// replay methods). The heartbeat, expiry and deletion paths change state
// only by producing records and replaying them, so loading a partition's
// records into an empty Manager rebuilds the same groups.
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
		g.Epoch = v.Epoch
	case *PartitionMetadataValue:
		g.Subscription = map[string]SubscribedTopic{}
		for _, t := range v.Topics {
			g.Subscription[t.TopicName] = SubscribedTopic{ID: t.TopicID, Name: t.TopicName, Partitions: t.NumPartitions}
		}
	case *MemberMetadataValue:
		m := g.Members[k.Member]
		if m == nil {
			m = &Member{ID: k.Member, Assigned: Assignment{}, PendingRevocation: Assignment{}}
			g.Members[k.Member] = m
		}
		if m.InstanceID != "" {
			delete(g.staticMembers, m.InstanceID)
		}
		m.InstanceID = deref(v.InstanceID)
		m.RackID = deref(v.RackID)
		m.ClientID = v.ClientID
		m.ClientHost = v.ClientHost
		m.SubscribedTopicNames = nilIfEmpty(v.SubscribedTopicNames)
		m.SubscribedTopicRegex = deref(v.SubscribedTopicRegex)
		m.RebalanceTimeoutMs = v.RebalanceTimeoutMs
		m.ServerAssignor = deref(v.ServerAssignor)
		m.Classic = v.Classic.clone()
		if m.InstanceID != "" {
			g.staticMembers[m.InstanceID] = m.ID
		}
	case *TargetAssignmentMetadataValue:
		g.AssignmentEpoch = v.AssignmentEpoch
	case *TargetAssignmentMemberValue:
		g.Target[k.Member] = fromTopicPartitions(v.TopicPartitions)
	case *CurrentMemberAssignmentValue:
		m := g.Members[k.Member]
		if m == nil {
			// Kafka creates the member here too: records of one member
			// may be compacted in any order.
			m = &Member{ID: k.Member}
			g.Members[k.Member] = m
		}
		g.setPartitionEpochs(m, false)
		m.Epoch = v.MemberEpoch
		m.PreviousEpoch = v.PreviousMemberEpoch
		m.State = MemberState(v.State)
		m.Assigned = fromTopicPartitions(v.AssignedPartitions)
		m.PendingRevocation = fromTopicPartitions(v.PartitionsPendingRevocation)
		g.setPartitionEpochs(m, true)
	case *RegularExpressionValue:
		g.Regexes[k.Regex] = RegexResolution{Topics: nilIfEmpty(v.Topics), Version: v.Version, Timestamp: v.Timestamp}
	default:
		return fmt.Errorf("consumer: replay of %T", v)
	}
	return nil
}

func (mgr *Manager) replayTombstone(g *Group, k Key) {
	switch k.Type {
	case TypeGroupMetadata:
		delete(mgr.groups, g.ID)
	case TypePartitionMetadata:
		g.Subscription = map[string]SubscribedTopic{}
	case TypeMemberMetadata:
		if m := g.Members[k.Member]; m != nil {
			g.setPartitionEpochs(m, false)
			if m.InstanceID != "" && g.staticMembers[m.InstanceID] == m.ID {
				delete(g.staticMembers, m.InstanceID)
			}
			delete(g.Members, k.Member)
		}
	case TypeTargetAssignmentMetadata:
		g.AssignmentEpoch = 0
	case TypeTargetAssignmentMember:
		delete(g.Target, k.Member)
	case TypeCurrentMemberAssignment:
		if m := g.Members[k.Member]; m != nil {
			g.setPartitionEpochs(m, false)
			m.Epoch, m.PreviousEpoch, m.State = LeaveEpoch, LeaveEpoch, MemberStable
			m.Assigned, m.PendingRevocation = Assignment{}, Assignment{}
		}
	case TypeRegularExpression:
		delete(g.Regexes, k.Regex)
	}
}

// setPartitionEpochs records (add) or clears m's partitions, assigned and
// pending revocation, in the partition epochs.
func (g *Group) setPartitionEpochs(m *Member, add bool) {
	for _, a := range []Assignment{m.Assigned, m.PendingRevocation} {
		for _, tp := range a.TPs() {
			if add {
				g.partitionEpochs[tp] = m.Epoch
			} else if e, ok := g.partitionEpochs[tp]; ok && e == m.Epoch {
				delete(g.partitionEpochs, tp)
			}
		}
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

// ReplayEncoded decodes and replays one record as read from the log;
// records of other types (offset commits, classic groups) are ignored.
func (mgr *Manager) ReplayEncoded(key, value []byte) error {
	rec, err := DecodeRecord(key, value)
	if err == ErrNotConsumerGroupRecord {
		return nil
	}
	if err != nil {
		return err
	}
	return mgr.Replay(rec)
}

// Groups returns the ids of the groups, sorted.
func (mgr *Manager) Groups() []string { return slices.Sorted(maps.Keys(mgr.groups)) }

// Group returns a group's state, or nil; the caller must not modify it.
func (mgr *Manager) Group(id string) *Group { return mgr.groups[id] }

// Clone returns a deep copy of the manager, for a caller that keeps the
// state as of its last committed offset and rolls back to it when an
// append fails.
func (mgr *Manager) Clone() *Manager {
	out := &Manager{cfg: mgr.cfg, groups: make(map[string]*Group, len(mgr.groups))}
	for id, g := range mgr.groups {
		out.groups[id] = g.clone()
	}
	return out
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
	c.Subscription = maps.Clone(g.Subscription)
	c.Regexes = make(map[string]RegexResolution, len(g.Regexes))
	for re, r := range g.Regexes {
		r.Topics = slices.Clone(r.Topics)
		c.Regexes[re] = r
	}
	c.partitionEpochs = maps.Clone(g.partitionEpochs)
	c.staticMembers = maps.Clone(g.staticMembers)
	return &c
}

// Snapshot returns a function that puts group id back as it is now (or
// removes it if it does not exist): the undo of a write that changes only
// that group, cheaper than Clone for a caller rolling back one append.
func (mgr *Manager) Snapshot(id string) (restore func()) {
	g := mgr.groups[id]
	if g == nil {
		return func() { delete(mgr.groups, id) }
	}
	saved := g.clone()
	return func() { mgr.groups[id] = saved }
}

// Reconfigure replaces the manager's configuration (replay does not use
// it, so a loader may replay into a manager made with a default one).
func (mgr *Manager) Reconfigure(cfg Config) { mgr.cfg = cfg.withDefaults() }

// Forget drops group id without records (the caller unloads it, or it was
// converted to a classic group whose tombstones it wrote itself).
func (mgr *Manager) Forget(id string) { delete(mgr.groups, id) }
