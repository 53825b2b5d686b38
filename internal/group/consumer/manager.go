// Package consumer is the I/O-free core of KIP-848 consumer groups (the
// "consumer" group protocol of Kafka 4): the group and member state, the
// ConsumerGroupHeartbeat transition with its target assignment and
// revoke-before-assign reconciliation, the server assignors, the
// __consumer_offsets records and their replay, the session and rebalance
// timers as intents, and the ConsumerGroupDescribe answer. It mirrors
// Kafka's org.apache.kafka.coordinator.group.modern.consumer package and
// the consumer-group paths of GroupMetadataManager.
//
// Nothing here does I/O or reads a clock: the caller passes the time and
// the topic metadata in, appends the returned records, schedules the
// returned timers, and calls Expire when one fires. State changes only by
// replaying records, so a caller that fails to append the records of a
// call must restore the state it had before (or reload it by replay).
package consumer

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"time"
)

// Config is the coordinator's consumer-group configuration.
type Config struct {
	// SessionTimeout is group.consumer.session.timeout.ms (45s).
	SessionTimeout time.Duration
	// HeartbeatInterval is group.consumer.heartbeat.interval.ms (5s).
	HeartbeatInterval time.Duration
	// MaxSize is group.consumer.max.size; 0 means no limit (Kafka's
	// default, Integer.MAX_VALUE).
	MaxSize int
	// Assignors are group.consumer.assignors; the first is the default.
	Assignors []Assignor
	// GroupOverrides returns a group's own settings (Kafka's group configs
	// consumer.session.timeout.ms and consumer.heartbeat.interval.ms, set
	// through IncrementalAlterConfigs on a GROUP resource, which checks
	// them against the broker's min/max bounds); a zero field, or a nil
	// func, means the broker's value.
	GroupOverrides func(group string) GroupSettings
	// NewMemberID generates the id of a member joining with an empty one
	// (ConsumerGroupHeartbeat v0); nil uses a random UUID in Kafka's
	// base64 form.
	NewMemberID func() string
	// Migration is group.consumer.migration.policy: whether a classic
	// group with members converts to a consumer group when a
	// consumer-protocol member joins it (upgrade), and back when its last
	// consumer-protocol member leaves (downgrade). The zero value is
	// Kafka 4's default, bidirectional.
	Migration MigrationPolicy
	// ClassicMaxSize is group.max.size, the classic group's limit: a
	// group with more classic members is not downgraded. 0: no limit.
	ClassicMaxSize int
}

// MigrationPolicy is group.consumer.migration.policy (Kafka's
// ConsumerGroupMigrationPolicy).
type MigrationPolicy int8

// Migration policies.
const (
	MigrationBidirectional MigrationPolicy = iota
	MigrationUpgrade
	MigrationDowngrade
	MigrationDisabled
)

// ParseMigrationPolicy reads a policy name (case-insensitive); ok is
// false for an unknown one.
func ParseMigrationPolicy(s string) (p MigrationPolicy, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "bidirectional":
		return MigrationBidirectional, true
	case "upgrade":
		return MigrationUpgrade, true
	case "downgrade":
		return MigrationDowngrade, true
	case "disabled":
		return MigrationDisabled, true
	}
	return MigrationBidirectional, false
}

// UpgradeEnabled reports whether classic groups may convert online.
func (p MigrationPolicy) UpgradeEnabled() bool {
	return p == MigrationBidirectional || p == MigrationUpgrade
}

// DowngradeEnabled reports whether consumer groups may convert back online.
func (p MigrationPolicy) DowngradeEnabled() bool {
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// GroupSettings are a group's own session timeout and heartbeat interval.
type GroupSettings struct {
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
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

// sessionOf is m's session timeout: a classic-protocol member's own (from
// its JoinGroup), else the group's.
func (mgr *Manager) sessionOf(group string, m *Member) time.Duration {
	if m.Classic != nil && m.Classic.SessionTimeoutMs > 0 {
		return time.Duration(m.Classic.SessionTimeoutMs) * time.Millisecond
	}
	return mgr.settings(group).SessionTimeout
}

// withDefaults fills the zero fields with Kafka's defaults.
func (c Config) withDefaults() Config {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if len(c.Assignors) == 0 {
		c.Assignors = DefaultAssignors()
	}
	if c.NewMemberID == nil {
		c.NewMemberID = randomMemberID
	}
	return c
}

// randomMemberID is a random UUID as Kafka's Uuid.toString writes it.
func randomMemberID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// TopicImage is one topic of the cluster metadata.
type TopicImage struct {
	ID         TopicID
	Partitions int32
}

// Image is the cluster's topic metadata as the coordinator sees it.
// Version changes whenever the topics do (the metadata offset); a group
// re-checks its subscription when it differs from the version it last
// saw.
type Image struct {
	Version int64
	Topics  map[string]TopicImage
}

// nameOf returns the name of the topic with id, if it exists.
func (img *Image) nameOf(id TopicID) (string, bool) {
	for name, t := range img.Topics {
		if t.ID == id {
			return name, true
		}
	}
	return "", false
}

// Manager holds the consumer groups of one __consumer_offsets partition.
// It is not safe for concurrent use: the coordinator runtime's partition
// owner calls it.
type Manager struct {
	cfg    Config
	groups map[string]*Group
}

// NewManager returns an empty Manager.
func NewManager(cfg Config) *Manager {
	return &Manager{cfg: cfg.withDefaults(), groups: map[string]*Group{}}
}

// assignor returns the configured assignor called name.
func (mgr *Manager) assignor(name string) Assignor {
	for _, a := range mgr.cfg.Assignors {
		if a.Name() == name {
			return a
		}
	}
	return nil
}

// TimerKind tells a member's timers apart.
type TimerKind int8

// Timer kinds.
const (
	// SessionTimer fires when a member has not heartbeated for the session
	// timeout; the member is fenced.
	SessionTimer TimerKind = iota
	// RebalanceTimer fires when a member has not revoked partitions within
	// its rebalance timeout; the member is fenced if it is still at Epoch
	// with partitions to revoke.
	RebalanceTimer
	// RegexTimer fires right after a heartbeat that left a regular
	// expression the group had not used before unresolved: the group's
	// regexes are resolved then, and the epoch bumped if that changes a
	// member's topics. Kafka resolves a new regex off the heartbeat, on
	// the coordinator's executor, so the heartbeat that subscribes
	// assigns the topics named literally and a later one the matched
	// ones (librdkafka's test 0045 do_test_resubscribe_with_regex
	// expects that order).
	RegexTimer
	// JoinTimer fires when a classic-protocol member told to rejoin
	// (REBALANCE_IN_PROGRESS) has not sent its JoinGroup within its
	// rebalance timeout; the member is fenced (Kafka's
	// scheduleConsumerGroupJoinTimeoutIfAbsent).
	JoinTimer
	// SyncTimer fires when a classic-protocol member has not sent its
	// SyncGroup within the rebalance timeout of its JoinGroup; the member
	// is fenced (Kafka's scheduleConsumerGroupSyncTimeout).
	SyncTimer
)

// Timer is a timer to schedule (or, with Cancel, to cancel). The caller
// keeps at most one timer per Key: scheduling one replaces the previous,
// unless IfAbsent is set (then an armed timer stays as it is).
type Timer struct {
	Kind   TimerKind
	Group  string
	Member string
	// Epoch is the member epoch a rebalance timer was set for.
	Epoch    int32
	At       time.Time
	Cancel   bool
	IfAbsent bool
	// CanDescribe, for a regex refresh, filters the topics a regex
	// matches with the ACLs of the member whose heartbeat asked for it
	// (nil: all), as Kafka does (KAFKA-18813).
	CanDescribe func(topic string) bool
}

// Key identifies the timer a schedule or cancel applies to (Kafka's
// "session-timeout-", "rebalance-timeout-", "join-timeout-" and
// "sync-timeout-" keys, with a separator no group or member id can
// forge).
func (t Timer) Key() string {
	var kind string
	switch t.Kind {
	case SessionTimer:
		kind = "session-timeout"
	case RebalanceTimer:
		kind = "rebalance-timeout"
	case JoinTimer:
		kind = "join-timeout"
	case RegexTimer:
		return "regex-refresh\x00" + t.Group
	default:
		kind = "sync-timeout"
	}
	return kind + "\x00" + t.Group + "\x00" + t.Member
}

// cancelTimers cancels every timer of member id (Kafka's cancelTimers).
func cancelTimers(group, id string) []Timer {
	return []Timer{
		{Kind: SessionTimer, Group: group, Member: id, Cancel: true},
		{Kind: RebalanceTimer, Group: group, Member: id, Cancel: true},
		{Kind: JoinTimer, Group: group, Member: id, Cancel: true},
		{Kind: SyncTimer, Group: group, Member: id, Cancel: true},
	}
}

// Result is what a call produced: the records to append (in order), then
// the timers to schedule or cancel once they are committed.
type Result struct {
	Records []Record
	Timers  []Timer
	// Downgrade, when set, is the classic group the caller must create
	// in place of the consumer group the records delete (the last
	// consumer-protocol member left a group of classic members).
	Downgrade *Downgrade
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

// AssignorName is the default assignor's name (the first configured).
func (c Config) AssignorName() string { return c.withDefaults().Assignors[0].Name() }
