// Package share is the I/O-free core of the share group coordinator
// (KIP-932): the share-group and member state, the ShareGroupHeartbeat
// transition with its target assignment, the simple server assignor, the
// share-group records of __consumer_offsets and their replay, the session
// timer as an intent, and the ShareGroupDescribe answer. It mirrors the
// share-group paths of Kafka's GroupMetadataManager and its
// org.apache.kafka.coordinator.group.modern.share package.
//
// A share group differs from a KIP-848 consumer group in three ways: the
// client generates its member id (a UUID), a partition may be assigned to
// several members at once (records are handed out one at a time by the
// share partitions, not by the assignment), and there is no revocation:
// a member's assignment changes as soon as it heartbeats at a new target.
//
// Nothing here does I/O or reads a clock: the caller passes the time and
// the topic metadata in, appends the returned records, schedules the
// returned timers, and calls Expire when one fires. State changes only by
// replaying records, so a caller that fails to append the records of a
// call must restore the state it had before (Snapshot).
package share

import (
	"maps"
	"slices"
	"time"

	"github.com/sluice-io/sluice/internal/group/consumer"
)

// TopicID is a topic's UUID.
type TopicID = [16]byte

// Image is the cluster's topic metadata, shared with the consumer-group
// core (its Version changes whenever the topics do).
type Image = consumer.Image

// TopicImage is one topic of an Image.
type TopicImage = consumer.TopicImage

// Client is what the request's header and connection say of the member.
type Client = consumer.Client

// Error is a Kafka error code with its message.
type Error = consumer.Error

// Config is the coordinator's share-group configuration (Kafka's
// GroupCoordinatorConfig group.share.*).
type Config struct {
	// SessionTimeout is group.share.session.timeout.ms (45s).
	SessionTimeout time.Duration
	// HeartbeatInterval is group.share.heartbeat.interval.ms (5s).
	HeartbeatInterval time.Duration
	// MaxSize is group.share.max.size (200); 0 means no limit.
	MaxSize int
	// Assignor is the server assignor (group.share.assignors has one:
	// simple).
	Assignor Assignor
	// GroupOverrides returns a group's own session timeout and heartbeat
	// interval (the group configs share.session.timeout.ms and
	// share.heartbeat.interval.ms); a zero field, or a nil func, means
	// the broker's value.
	GroupOverrides func(group string) GroupSettings
}

// GroupSettings are a group's own session timeout and heartbeat interval.
type GroupSettings struct {
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
}

// withDefaults fills the zero fields with Kafka's defaults.
func (c Config) withDefaults() Config {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.Assignor == nil {
		c.Assignor = SimpleAssignor{}
	}
	return c
}

// settings are the session timeout and heartbeat interval of group.
func (mgr *Manager) settings(group string) GroupSettings {
	s := GroupSettings{}
	if mgr.cfg.GroupOverrides != nil {
		s = mgr.cfg.GroupOverrides(group)
	}
	if s.SessionTimeout <= 0 {
		s.SessionTimeout = mgr.cfg.SessionTimeout
	}
	if s.HeartbeatInterval <= 0 {
		s.HeartbeatInterval = mgr.cfg.HeartbeatInterval
	}
	return s
}

// Manager holds the share groups of one __consumer_offsets partition. It
// is not safe for concurrent use: the coordinator runtime's partition
// owner calls it.
type Manager struct {
	cfg    Config
	groups map[string]*Group
}

// NewManager returns an empty Manager.
func NewManager(cfg Config) *Manager {
	return &Manager{cfg: cfg.withDefaults(), groups: map[string]*Group{}}
}

// Reconfigure replaces the manager's configuration (replay does not use
// it, so a loader may replay into a manager made with a default one).
func (mgr *Manager) Reconfigure(cfg Config) { mgr.cfg = cfg.withDefaults() }

// AssignorName is the server assignor's name.
func (mgr *Manager) AssignorName() string { return mgr.cfg.Assignor.Name() }

// Groups returns the ids of the groups, sorted.
func (mgr *Manager) Groups() []string { return slices.Sorted(maps.Keys(mgr.groups)) }

// Group returns a group's state, or nil; the caller must not modify it.
func (mgr *Manager) Group(id string) *Group { return mgr.groups[id] }

// Timer is a member's session timer to schedule (or, with Cancel, to
// cancel). The caller keeps at most one timer per Key.
type Timer struct {
	Group  string
	Member string
	At     time.Time
	Cancel bool
}

// Key identifies the timer (Kafka's "session-timeout-" key of a share
// member, with a separator no group or member id can forge).
func (t Timer) Key() string { return "share-session-timeout\x00" + t.Group + "\x00" + t.Member }

// Result is what a call produced: the records to append (in order), then
// the timers to schedule or cancel once they are committed.
type Result struct {
	Records []Record
	Timers  []Timer
}

// apply replays records into the manager; the records were built from the
// current state, so replay cannot fail.
func (mgr *Manager) apply(records []Record) {
	for _, r := range records {
		if err := mgr.Replay(r); err != nil {
			panic(err)
		}
	}
}

// Snapshot returns a function that puts group id back as it is now (or
// removes it if it does not exist): the undo of a write that changes only
// that group.
func (mgr *Manager) Snapshot(id string) (restore func()) {
	g := mgr.groups[id]
	if g == nil {
		return func() { delete(mgr.groups, id) }
	}
	saved := g.clone()
	return func() { mgr.groups[id] = saved }
}

// Clone returns a deep copy of the manager.
func (mgr *Manager) Clone() *Manager {
	out := &Manager{cfg: mgr.cfg, groups: make(map[string]*Group, len(mgr.groups))}
	for id, g := range mgr.groups {
		out.groups[id] = g.clone()
	}
	return out
}

// Forget drops group id without records.
func (mgr *Manager) Forget(id string) { delete(mgr.groups, id) }

// EnsureGroup makes share group id exist, empty at epoch 0 if it did not,
// with parts recorded among its initialized share partitions: what
// AlterShareGroupOffsets does before it re-initializes their state (Kafka's
// GroupMetadataManager creates the share group and records the altered
// partitions, so a later DeleteGroups deletes their state too). It returns
// the records to append, already applied; none if nothing changes.
func (mgr *Manager) EnsureGroup(id string, parts []SharePartition) []Record {
	var recs []Record
	g := mgr.groups[id]
	if g == nil {
		recs = append(recs, Record{Key{Type: TypeGroupMetadata, Group: id}, &GroupMetadataValue{}})
		g = newGroup(id)
	}
	st := g.Partitions.clone()
	changed := false
	for _, p := range parts {
		cur := st.Initialized[p.TopicID]
		if slices.Contains(cur.Partitions, p.Partition) {
			continue
		}
		cur.Name = p.Topic
		cur.Partitions = append(slices.Clone(cur.Partitions), p.Partition)
		slices.Sort(cur.Partitions)
		st.Initialized[p.TopicID] = cur
		changed = true
	}
	if changed {
		recs = append(recs, statePartitionRecordOf(id, st))
	}
	mgr.apply(recs)
	return recs
}
