// Package group is sluice's classic consumer-group coordinator (Kafka's
// GroupCoordinator): group membership (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup), committed offsets, and their persistence as Kafka-format
// records in the internal topic __consumer_offsets.
//
// A group lives in partition PartitionFor(groupID) of __consumer_offsets
// and is served by that partition's leader. The Coordinator owns "shards",
// one per offsets partition it leads: Elect loads a shard by replaying the
// partition, Resign drops it. On a single node every partition is led here
// and elected at start; with replicated partitions the broker will call
// Elect/Resign on leadership changes.
//
// Each Group is a state machine that does no I/O (group.go, join.go,
// offsets.go); the Coordinator serializes calls per shard, appends the
// records the groups ask for, and drives time through a Clock.
package group

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/storage"
)

// Hard limits, whatever the configuration says.
const (
	// MaxGroups bounds the groups of one coordinator.
	MaxGroups = 100000
	// MaxGroupSize bounds group.max.size (Kafka's default is unbounded).
	MaxGroupSize = 4096
	// MaxProtocols bounds the protocols of one JoinGroup.
	MaxProtocols = 64
	// MaxMemberMetadataBytes bounds the protocol metadata of one JoinGroup.
	MaxMemberMetadataBytes = 1 << 20
	// MaxGroupMetadataBytes bounds the members' metadata of one group.
	MaxGroupMetadataBytes = 64 << 20
)

// Config holds the coordinator settings, named after Kafka's broker configs.
type Config struct {
	NumPartitions          int32         // offsets.topic.num.partitions (50)
	ReplicationFactor      int16         // offsets.topic.replication.factor (3, capped by live brokers)
	SegmentBytes           int64         // offsets.topic.segment.bytes (100 MiB)
	InitialRebalanceDelay  time.Duration // group.initial.rebalance.delay.ms (3000)
	MinSessionTimeout      time.Duration // group.min.session.timeout.ms (6000)
	MaxSessionTimeout      time.Duration // group.max.session.timeout.ms (1800000)
	MaxGroupSize           int           // group.max.size, at most MaxGroupSize
	MaxOffsetMetadataBytes int           // offset.metadata.max.bytes (4096)
	OffsetsRetention       time.Duration // offsets.retention.minutes (10080)
	RetentionCheckInterval time.Duration // offsets.retention.check.interval.ms (600000)
}

// ConfigFrom reads the coordinator settings from the broker configuration.
func ConfigFrom(b *config.Broker) Config {
	ms := func(name string, def int64) time.Duration {
		return time.Duration(b.Int(name, def)) * time.Millisecond
	}
	c := Config{
		NumPartitions:          int32(b.Int("offsets.topic.num.partitions", 50)),
		ReplicationFactor:      int16(b.Int("offsets.topic.replication.factor", 3)),
		SegmentBytes:           b.Int("offsets.topic.segment.bytes", 100<<20),
		InitialRebalanceDelay:  ms("group.initial.rebalance.delay.ms", 3000),
		MinSessionTimeout:      ms("group.min.session.timeout.ms", 6000),
		MaxSessionTimeout:      ms("group.max.session.timeout.ms", 1800000),
		MaxGroupSize:           int(min(b.Int("group.max.size", MaxGroupSize), MaxGroupSize)),
		MaxOffsetMetadataBytes: int(b.Int("offset.metadata.max.bytes", 4096)),
		OffsetsRetention:       time.Duration(b.Int("offsets.retention.minutes", 10080)) * time.Minute,
		RetentionCheckInterval: ms("offsets.retention.check.interval.ms", 600000),
	}
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.MaxGroupSize <= 0 {
		c.MaxGroupSize = 1
	}
	if c.RetentionCheckInterval < time.Millisecond {
		c.RetentionCheckInterval = time.Millisecond
	}
	return c
}

// Options configure a Coordinator.
type Options struct {
	Config Config
	// Clock defaults to the broker's.
	Clock clock.Clock
	// Logger defaults to the broker's.
	Logger *slog.Logger
}

// shard is the part of the coordinator serving one offsets partition.
type shard struct {
	index int32

	mu      sync.Mutex
	p       *broker.Partition
	loading bool
	gone    bool
	groups  map[string]*Group
	timers  map[string]*groupTimer

	// txnGroups lists, per producer id, the groups that may hold its
	// pending transactional offsets (an entry may be stale); txnEnds are
	// CompleteTxn calls that arrived while the shard was loading, applied
	// once it is loaded.
	txnGroups map[int64]map[string]bool
	txnEnds   []txnEnd
}

type groupTimer struct {
	at   time.Time
	stop func() bool
}

// Coordinator serves the consumer groups of the offsets partitions this
// node leads.
type Coordinator struct {
	b     *broker.Broker
	cfg   Config
	clock clock.Clock
	log   *slog.Logger

	createMu sync.Mutex // serializes creating __consumer_offsets

	mu            sync.Mutex // guards shards, closed, retentionStop; taken before any shard.mu
	shards        map[int32]*shard
	closed        bool
	retentionStop func() bool
	numGroups     atomic.Int64
	numTxnOffsets atomic.Int64 // pending transactional offsets, at most MaxTxnOffsets
	loads         sync.WaitGroup
	waitingLogged atomic.Bool // "not creating __consumer_offsets yet" was logged
}

// New returns a coordinator for b and elects every offsets partition this
// node leads (loading them in the background).
func New(b *broker.Broker, opts Options) *Coordinator {
	if opts.Clock == nil {
		opts.Clock = b.Clock()
	}
	if opts.Logger == nil {
		opts.Logger = b.Logger()
	}
	c := &Coordinator{b: b, cfg: opts.Config, clock: opts.Clock, log: opts.Logger.With("component", "group"),
		shards: map[int32]*shard{}}
	c.reconcile()
	return c
}

// Config returns the coordinator's configuration.
func (c *Coordinator) Config() Config { return c.cfg }

// reconcile elects every offsets partition led here that has no shard and
// resigns shards whose partition is gone or led elsewhere.
func (c *Coordinator) reconcile() {
	t := c.b.Image().Topics[OffsetsTopic]
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.shards {
		if !c.owns(s) {
			c.resignLocked(i)
		}
	}
	if t == nil || c.closed {
		return
	}
	for _, p := range t.Partitions {
		if p.Leader == c.b.NodeID() && c.shards[p.Index] == nil {
			c.electLocked(p.Index)
		}
	}
}

// owns reports whether s still serves the live local replica of its
// partition (a closed broker, a deleted topic or a lost leadership end it).
func (c *Coordinator) owns(s *shard) bool {
	t := c.b.Image().Topics[OffsetsTopic]
	if t == nil || int(s.index) >= len(t.Partitions) || t.Partitions[s.index].Leader != c.b.NodeID() {
		return false
	}
	p, err := c.b.Partition(OffsetsTopic, s.index)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loading || s.p == p
}

// Elect makes this node the coordinator of offsets partition i: its groups
// are loaded from the partition in the background, and requests for them
// get COORDINATOR_NOT_AVAILABLE until that is done.
func (c *Coordinator) Elect(i int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[i] == nil && !c.closed {
		c.electLocked(i)
	}
}

func (c *Coordinator) electLocked(i int32) *shard {
	s := &shard{index: i, loading: true, groups: map[string]*Group{}, timers: map[string]*groupTimer{},
		txnGroups: map[int64]map[string]bool{}}
	c.shards[i] = s
	c.armRetentionLocked()
	p, err := c.b.Partition(OffsetsTopic, i)
	if err == nil && p.LogEndOffset() <= p.LogStartOffset() {
		// Nothing to replay (a new topic): serve at once.
		s.p, s.loading = p, false
		return s
	}
	c.loads.Add(1)
	go func() {
		defer c.loads.Done()
		c.load(s)
	}()
	return s
}

// Resign stops coordinating offsets partition i: its groups are dropped
// and every waiting request is answered with NOT_COORDINATOR.
func (c *Coordinator) Resign(i int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resignLocked(i)
}

func (c *Coordinator) resignLocked(i int32) {
	s := c.shards[i]
	if s == nil {
		return
	}
	delete(c.shards, i)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = true
	for id, g := range s.groups {
		if t := s.timers[id]; t != nil {
			t.stop()
		}
		for _, m := range g.members {
			if m.joinWait != nil {
				m.joinWait <- joinError(kerr.NotCoordinator.Code, m.id)
				m.joinWait = nil
			}
			if m.syncWait != nil {
				m.syncWait <- syncError(kerr.NotCoordinator.Code)
				m.syncWait = nil
			}
		}
		g.transition(Dead, c.clock.Now())
		c.numGroups.Add(-1)
		c.numTxnOffsets.Add(-int64(g.numTxnOffsets()))
	}
	s.groups = map[string]*Group{}
	s.timers = map[string]*groupTimer{}
	s.txnGroups = map[int64]map[string]bool{}
	s.txnEnds = nil
}

// Close resigns every shard and stops the background work. Requests that
// were waiting are answered with NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	for i := range c.shards {
		c.resignLocked(i)
	}
	if c.retentionStop != nil {
		c.retentionStop()
		c.retentionStop = nil
	}
	c.mu.Unlock()
	c.loads.Wait()
}

// loadLog replays log's records in [from, end) (a partition of
// __consumer_offsets, possibly compacted: batches with gaps and empty
// batches) into a new loaded state, reporting read and record errors to
// logErr and going on past bad records.
func loadLog(log *storage.Log, from, end int64, logErr func(msg string, off int64, err error)) *loaded {
	l := newLoaded()
	for off := from; off < end; {
		sl, err := log.Read(off, 1<<20, end)
		if err != nil {
			logErr("loading groups", off, err)
			break
		}
		data, err := sl.AppendTo(nil)
		if err != nil || len(data) == 0 {
			if err != nil {
				logErr("loading groups", off, err)
			}
			break
		}
		next, err := l.decodeBatches(data)
		if err != nil {
			logErr("loading groups: bad record", off, err)
		}
		if next <= off {
			break
		}
		off = next
	}
	return l
}

// load replays offsets partition s.index into groups.
func (c *Coordinator) load(s *shard) {
	p, err := c.b.Partition(OffsetsTopic, s.index)
	if err != nil {
		c.Resign(s.index)
		return
	}
	start := c.clock.Now()
	// A leader's log is authoritative (a new leader never truncates), so
	// load everything it has, as Kafka's loader reads to the log end.
	l := loadLog(p.Log(), p.LogStartOffset(), p.LogEndOffset(), func(msg string, off int64, err error) {
		c.log.Error(msg, "partition", s.index, "offset", off, "err", err)
	})
	now := c.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return
	}
	for id, gm := range l.groups {
		g := restoreGroup(id, &c.cfg, gm, now)
		for tp, o := range l.offsets[id] {
			g.offsets[tp] = o
		}
		s.groups[id] = g
	}
	for id, offs := range l.offsets {
		if s.groups[id] != nil || len(offs) == 0 {
			continue
		}
		g := newGroup(id, &c.cfg, now)
		g.offsets = offs
		s.groups[id] = g
	}
	c.restoreTxnOffsets(s, l, now)
	c.numGroups.Add(int64(len(s.groups)))
	s.p, s.loading = p, false
	for _, e := range s.txnEnds {
		c.completeTxnLocked(s, e.pid, e.commit)
	}
	s.txnEnds = nil
	for _, g := range s.groups {
		c.schedule(s, g)
	}
	c.log.Info("loaded groups", "partition", s.index, "groups", len(s.groups), "took", clock.Since(c.clock, start))
}

// restoreGroup rebuilds a group from its GroupMetadataValue: with members
// it resumes Stable at its generation (members that do not heartbeat
// expire), else Empty.
func restoreGroup(id string, cfg *Config, v *kmsg.GroupMetadataValue, now time.Time) *Group {
	g := newGroup(id, cfg, now)
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	if v.CurrentStateTimestamp >= 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, vm := range v.Members {
		g.seq++
		session := time.Duration(vm.SessionTimeoutMillis) * time.Millisecond
		rebalance := time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond
		if rebalance <= 0 {
			rebalance = session
		}
		m := &member{id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
			sessionTimeout: session, rebalanceTimeout: rebalance, protocolType: v.ProtocolType,
			protocols: []protocol{{name: g.protocol, metadata: vm.Subscription}}, assignment: vm.Assignment,
			seq: g.seq, expireAt: now.Add(session)}
		g.members[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
	}
	if len(g.members) > 0 {
		g.state = Stable
		if g.members[g.leader] == nil {
			g.leader = g.sortedMembers()[0].id
		}
		g.computeSubscribed()
	} else {
		g.state = Empty
	}
	return g
}

// shardFor returns the shard of group, creating __consumer_offsets on first
// use. Errors: COORDINATOR_NOT_AVAILABLE (no topic yet, loading),
// NOT_COORDINATOR (led elsewhere).
func (c *Coordinator) shardFor(group string) (*shard, *kerr.Error) {
	t := c.b.Image().Topics[OffsetsTopic]
	if t == nil {
		if err := c.createTopic(); err != nil {
			return nil, kerr.CoordinatorNotAvailable
		}
		c.reconcile()
		if t = c.b.Image().Topics[OffsetsTopic]; t == nil {
			return nil, kerr.CoordinatorNotAvailable
		}
	}
	if len(t.Partitions) == 0 {
		return nil, kerr.CoordinatorNotAvailable
	}
	i := PartitionFor(group, int32(len(t.Partitions)))
	if t.Partitions[i].Leader != c.b.NodeID() {
		return nil, kerr.NotCoordinator
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, kerr.NotCoordinator
	}
	s := c.shards[i]
	if s != nil && !c.owns(s) {
		c.resignLocked(i)
		s = nil
	}
	if s == nil {
		s = c.electLocked(i)
	}
	return s, nil
}

// lockShard is shardFor plus the shard's lock, failing while it loads.
// The caller unlocks s.mu.
func (c *Coordinator) lockShard(group string) (*shard, *kerr.Error) {
	s, err := c.shardFor(group)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	switch {
	case s.gone:
		s.mu.Unlock()
		return nil, kerr.NotCoordinator
	case s.loading:
		s.mu.Unlock()
		return nil, kerr.CoordinatorNotAvailable
	}
	return s, nil
}

// createTopic creates __consumer_offsets (compacted in intent, never
// deleted by time: sluice does not compact yet).
func (c *Coordinator) createTopic() error {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	img := c.b.Image()
	if img.Topics[OffsetsTopic] != nil {
		return nil
	}
	rf, ok := offsetsReplicationFactor(c.cfg.ReplicationFactor, img.Brokers, len(c.b.Config().Voters))
	if !ok {
		// Kafka's behaviour: the topic is not created below its
		// replication factor; clients retry (COORDINATOR_NOT_AVAILABLE).
		if !c.waitingLogged.Swap(true) {
			c.log.Info("not creating "+OffsetsTopic+" until enough brokers are active",
				"replication.factor", rf, "active", activeBrokers(img.Brokers))
		}
		return kerr.CoordinatorNotAvailable
	}
	configs := map[string]string{
		"cleanup.policy": "compact",
		"retention.ms":   "-1",
		"segment.bytes":  strconv.FormatInt(c.cfg.SegmentBytes, 10),
	}
	err := c.b.CreateTopic(OffsetsTopic, c.cfg.NumPartitions, rf, configs, false)
	if err != nil && err != kerr.TopicAlreadyExists {
		c.log.Error("creating "+OffsetsTopic, "err", err)
		return err
	}
	return nil
}

// offsetsReplicationFactor is the replication factor __consumer_offsets is
// created with: offsets.topic.replication.factor, capped by the brokers the
// cluster is known to have (registered ones, and at least the controller
// voters, which are all brokers too), so that a single node works with the
// default of 3. ok is false while fewer brokers than that are active: the
// topic must then not be created yet, or a cluster whose first group
// request lands while its brokers are still registering would keep an
// under-replicated offsets topic forever.
func offsetsReplicationFactor(configured int16, brokers map[int32]metadata.Broker, voters int) (rf int16, ok bool) {
	known := max(len(brokers), voters, 1)
	rf = int16(max(min(int(configured), known), 1))
	return rf, activeBrokers(brokers) >= int(rf)
}

func activeBrokers(brokers map[int32]metadata.Broker) int {
	n := 0
	for _, b := range brokers {
		if b.Active() {
			n++
		}
	}
	return n
}

// group returns a group of s, creating an Empty one if create is set (nil
// if MaxGroups is reached).
func (c *Coordinator) group(s *shard, id string, create bool) *Group {
	g := s.groups[id]
	if g != nil || !create {
		return g
	}
	if c.numGroups.Load() >= MaxGroups {
		c.log.Warn("too many groups", "max", MaxGroups)
		return nil
	}
	g = newGroup(id, &c.cfg, c.clock.Now())
	s.groups[id] = g
	c.numGroups.Add(1)
	return g
}

// removeGroup drops a group (deleted or expired) from s, with its pending
// transactional offsets.
func (c *Coordinator) removeGroup(s *shard, g *Group) {
	c.numTxnOffsets.Add(-int64(g.numTxnOffsets()))
	clear(g.txn)
	g.transition(Dead, c.clock.Now())
	if s.groups[g.id] == g {
		delete(s.groups, g.id)
		c.numGroups.Add(-1)
	}
	if t := s.timers[g.id]; t != nil {
		t.stop()
		delete(s.timers, g.id)
	}
}
