// Package group is sluice's classic consumer-group coordinator (Kafka's
// GroupCoordinator): group membership (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup), committed offsets, and their persistence as Kafka-format
// records in the internal topic __consumer_offsets.
//
// A group lives in partition PartitionFor(groupID) of __consumer_offsets
// and is served by that partition's leader. The coordinator runtime
// (internal/coord) runs one shard per offsets partition led here: Elect
// loads it by replaying the partition, Resign drops it (the broker calls
// them on leadership changes, with the leader epoch), and every request
// runs as an event on the shard's owner.
//
// Each Group is a state machine that does no I/O (group.go, join.go,
// offsets.go); the runtime serializes the events of a shard, appends the
// records the groups ask for and runs their timers; docs/coordinators.md
// describes it.
package group

import (
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/coord"
	"github.com/sluice-io/sluice/internal/group/consumer"
	sharegroup "github.com/sluice-io/sluice/internal/group/share"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/share"
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
	// Stepped runs the coordinator without goroutines, for the
	// deterministic simulator (stepped.go).
	Stepped bool
	// wrapReplica (tests) is the replica the runtime sees in place of
	// the broker's partition.
	wrapReplica func(*broker.Partition) logReplica
}

// logReplica is a coordinator replica with its log (a *broker.Partition).
type logReplica interface {
	coord.Replica
	Log() *storage.Log
}

// shardState is the state machine of one offsets partition, run by the
// coordinator runtime (internal/coord) on the partition's owner.
type shardState struct {
	groups map[string]*Group
	// txnGroups lists, per producer id, the groups that may hold its
	// pending transactional offsets (an entry may be stale).
	txnGroups map[int64]map[string]bool
	// consumers are the partition's KIP-848 consumer groups.
	consumers *consumer.Manager
	// shares are the partition's KIP-932 share groups.
	shares   *sharegroup.Manager
	loadTook time.Duration
	replayed bool // the partition had records to replay
}

// shard is the runtime's shard of one offsets partition: its methods
// other than Post, Stopped, Epoch and Partition run on its owner.
type shard = coord.Shard[*shardState]

// Timer keys of a shard: one per group, and the offset expiry.
const (
	groupTimerPrefix = "group:"
	retentionTimer   = "retention"
)

// Coordinator serves the consumer groups of the offsets partitions this
// node leads.
type Coordinator struct {
	b     *broker.Broker
	cfg   Config
	clock clock.Clock
	log   *slog.Logger
	rt    *coord.Runtime[*shardState]

	createMu sync.Mutex // serializes creating __consumer_offsets

	mu            sync.Mutex // guards closed
	closed        bool
	numGroups     atomic.Int64
	numTxnOffsets atomic.Int64   // pending transactional offsets, at most MaxTxnOffsets
	work          sync.WaitGroup // reconciliations started by timers
	waitingLogged atomic.Bool    // "not creating __consumer_offsets yet" was logged

	ccfg       consumer.Config // KIP-848 settings (group.consumer.*)
	consumerOn bool            // group.coordinator.rebalance.protocols lists consumer
	cimg       atomic.Value    // *imageCache: the consumer.Image of the last metadata image

	stepped     bool
	wrapReplica func(*broker.Partition) logReplica // Options.wrapReplica

	scfg      sharegroup.Config               // KIP-932 settings (group.share.*)
	persister atomic.Pointer[share.Persister] // share-partition state, deleted with a share group
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
		ccfg: ConsumerConfig(b.Config()), consumerOn: consumerEnabled(b.Config()), stepped: opts.Stepped, wrapReplica: opts.wrapReplica,
		scfg: ShareConfig(b.Config())}
	c.rt = coord.New(coord.Config[*shardState]{
		Name: "group", Clock: c.clock, Logger: c.log,
		Replica: func(i int32) (coord.Replica, error) {
			p, err := c.replica(i)
			if err != nil {
				return nil, err
			}
			if c.wrapReplica != nil {
				return c.wrapReplica(p), nil
			}
			return p, nil
		},
		Load: c.load, Loaded: c.loaded, Unloaded: c.unloaded, Stepped: opts.Stepped,
	})
	c.reconcile()
	return c
}

// Config returns the coordinator's configuration.
func (c *Coordinator) Config() Config { return c.cfg }

// isClosed reports whether Close was called.
func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// reconcile elects every offsets partition led here that has no shard and
// resigns shards whose partition is gone or led elsewhere. It waits for
// resigned shards' owners: an event must not call it.
func (c *Coordinator) reconcile() {
	for _, i := range c.rt.Partitions() {
		if !c.owns(i) {
			c.rt.Resign(i, -1)
		}
	}
	t := c.b.Image().Topics[OffsetsTopic]
	if t == nil || c.isClosed() {
		return
	}
	for _, p := range t.Partitions {
		if _, ok := c.rt.Info(p.Index); p.Leader == c.b.NodeID() && !ok {
			c.rt.Elect(p.Index, -1)
		}
	}
}

// owns reports whether the shard of partition i still serves the live
// local replica of its partition at the leader epoch it loaded (a closed
// broker, a deleted topic, a lost leadership or one that went elsewhere
// and came back end it).
func (c *Coordinator) owns(i int32) bool {
	t := c.b.Image().Topics[OffsetsTopic]
	if t == nil || int(i) >= len(t.Partitions) || t.Partitions[i].Leader != c.b.NodeID() {
		return false
	}
	p, err := c.replica(i)
	if err != nil {
		return false
	}
	if c.wrapReplica != nil {
		return c.rt.Current(i, c.wrapReplica(p))
	}
	return c.rt.Current(i, p)
}

// Elect makes this node the coordinator of offsets partition i at its
// replica's leader epoch: its groups are loaded from the partition in the
// background, and requests for them get COORDINATOR_LOAD_IN_PROGRESS until
// that is done.
func (c *Coordinator) Elect(i int32) { c.ElectAt(i, -1) }

// ElectAt is Elect at leader epoch epoch (the epoch of the leadership
// change; a negative one is the replica's): an election older than the
// shard's is ignored.
func (c *Coordinator) ElectAt(i, epoch int32) {
	if c.isClosed() {
		return
	}
	c.rt.Reelect(i, epoch, func() bool { return c.owns(i) })
}

// Resign stops coordinating offsets partition i: its groups are dropped
// and every waiting request is answered with NOT_COORDINATOR.
func (c *Coordinator) Resign(i int32) { c.rt.Resign(i, -1) }

// ResignAt is Resign for a leadership change at leader epoch epoch: a
// shard elected at a newer epoch stays. It does not wait for the shard's
// owner to finish (the broker's leadership listeners call it holding
// locks that a request being served may need).
func (c *Coordinator) ResignAt(i, epoch int32) { c.rt.ResignNoWait(i, epoch) }

// unloaded answers the shard's waiting requests with NOT_COORDINATOR and
// drops its groups (the runtime's Unloaded).
func (c *Coordinator) unloaded(s *shard) {
	st := s.State()
	now := c.clock.Now()
	for _, g := range st.groups {
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
		g.transition(Dead, now)
		c.numGroups.Add(-1)
		c.numTxnOffsets.Add(-int64(g.numTxnOffsets()))
	}
	st.groups = map[string]*Group{}
	st.txnGroups = map[int64]map[string]bool{}
	st.consumers = c.newConsumerManager()
	st.shares = sharegroup.NewManager(c.shareConfig())
}

// Close resigns every shard and stops the background work. Requests that
// were waiting are answered with NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.rt.Close()
	c.work.Wait()
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

// load replays offsets partition i into groups (the runtime's Load).
func (c *Coordinator) load(i int32, r coord.Replica) (*shardState, error) {
	p := r.(logReplica)
	start := c.clock.Now()
	// A leader's log is authoritative (a new leader never truncates), so
	// load everything it has, as Kafka's loader reads to the log end.
	l := loadLog(p.Log(), p.LogStartOffset(), p.LogEndOffset(), func(msg string, off int64, err error) {
		c.log.Error(msg, "partition", i, "offset", off, "err", err)
	})
	now := c.clock.Now()
	l.consumers.Reconfigure(c.consumerConfig())
	l.shares.Reconfigure(c.shareConfig())
	st := &shardState{groups: map[string]*Group{}, txnGroups: map[int64]map[string]bool{}, consumers: l.consumers, shares: l.shares}
	for id, gm := range l.groups {
		g := restoreGroup(id, &c.cfg, gm, now)
		for tp, o := range l.offsets[id] {
			g.offsets[tp] = o
		}
		st.groups[id] = g
	}
	for id, offs := range l.offsets {
		if st.groups[id] != nil || len(offs) == 0 {
			continue
		}
		g := newGroup(id, &c.cfg, now)
		g.offsets = offs
		st.groups[id] = g
	}
	c.restoreTxnOffsets(st, l, now)
	st.loadTook = clock.Since(c.clock, start)
	st.replayed = p.LogEndOffset() > p.LogStartOffset()
	return st, nil
}

// loaded counts the shard's groups, arms their timers and the offset
// expiry (the runtime's Loaded).
func (c *Coordinator) loaded(s *shard) {
	st := s.State()
	c.numGroups.Add(int64(len(st.groups)))
	for _, g := range st.groups {
		c.numTxnOffsets.Add(int64(g.numTxnOffsets()))
		c.schedule(s, g)
	}
	c.armRetention(s)
	c.loadedConsumers(s)
	c.loadedShares(s)
	if st.replayed {
		c.log.Info("loaded groups", "partition", s.Partition(), "groups", len(st.groups), "consumerGroups", len(st.consumers.Groups()), "shareGroups", len(st.shares.Groups()), "took", st.loadTook)
	}
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

// partition returns the offsets partition of group, electing its shard
// if needed and creating __consumer_offsets on first use. Errors:
// COORDINATOR_NOT_AVAILABLE (no topic yet), NOT_COORDINATOR (led
// elsewhere).
func (c *Coordinator) partition(group string) (int32, *kerr.Error) {
	t := c.b.Image().Topics[OffsetsTopic]
	if t == nil {
		if err := c.createTopic(); err != nil {
			return -1, kerr.CoordinatorNotAvailable
		}
		c.reconcile()
		if t = c.b.Image().Topics[OffsetsTopic]; t == nil {
			return -1, kerr.CoordinatorNotAvailable
		}
	}
	if len(t.Partitions) == 0 {
		return -1, kerr.CoordinatorNotAvailable
	}
	i := PartitionFor(group, int32(len(t.Partitions)))
	if t.Partitions[i].Leader != c.b.NodeID() || c.isClosed() {
		return -1, kerr.NotCoordinator
	}
	if _, ok := c.rt.Info(i); ok && !c.owns(i) {
		c.rt.Resign(i, -1)
	}
	if _, ok := c.rt.Info(i); !ok {
		c.rt.Elect(i, -1)
	}
	return i, nil
}

// run runs fn on the owner of group's shard: NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE (no topic yet) or COORDINATOR_LOAD_IN_PROGRESS
// (loading) if it cannot.
func (c *Coordinator) run(group string, fn func(s *shard)) *kerr.Error {
	i, err := c.partition(group)
	if err != nil {
		return err
	}
	if c.stepped {
		return c.runStepped(i, fn)
	}
	return runError(c.rt.Run(i, fn))
}

// runError maps the runtime's errors. A shard still loading answers
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka's CoordinatorRuntime does for a
// partition in state LOADING: clients retry it at the same coordinator
// (librdkafka gives up an OffsetFetch on COORDINATOR_NOT_AVAILABLE and
// reports the error to the application).
func runError(err error) *kerr.Error {
	switch err {
	case nil:
		return nil
	case coord.ErrLoading:
		return kerr.CoordinatorLoadInProgress
	}
	return kerr.NotCoordinator
}

// forEachShard runs fn on the owner of every loaded shard, one after
// another; loading is set if one was still loading.
func (c *Coordinator) forEachShard(fn func(s *shard)) (loading bool) {
	for _, i := range c.rt.Partitions() {
		if err := c.rt.Run(i, fn); err == coord.ErrLoading {
			loading = true
		}
	}
	return loading
}

// createTopic creates __consumer_offsets (compacted in intent, never
// deleted by time: sluice does not compact yet).
func (c *Coordinator) createTopic() error {
	if c.stepped {
		// The creation waits for the metadata, which a stepped
		// coordinator's caller moves: it creates the topic itself.
		return kerr.CoordinatorNotAvailable
	}
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
	st := s.State()
	g := st.groups[id]
	if g != nil || !create {
		return g
	}
	if c.numGroups.Load() >= MaxGroups {
		c.log.Warn("too many groups", "max", MaxGroups)
		return nil
	}
	g = newGroup(id, &c.cfg, c.clock.Now())
	st.groups[id] = g
	c.numGroups.Add(1)
	return g
}

// removeGroup drops a group (deleted or expired) from s, with its pending
// transactional offsets.
func (c *Coordinator) removeGroup(s *shard, g *Group) {
	st := s.State()
	c.numTxnOffsets.Add(-int64(g.numTxnOffsets()))
	g.removedTxn, g.removedState = maps.Clone(g.txn), g.state
	clear(g.txn)
	g.transition(Dead, c.clock.Now())
	if st.groups[g.id] == g {
		delete(st.groups, g.id)
		c.numGroups.Add(-1)
	}
	s.Cancel(groupTimerPrefix + g.id)
}

// unremoveGroup undoes removeGroup (owner): the deletion's records were
// not committed. A group created under the same id meanwhile is left.
func (c *Coordinator) unremoveGroup(s *shard, g *Group) {
	st := s.State()
	if g.state != Dead || st.groups[g.id] != nil || s.Gone() {
		return
	}
	g.txn, g.removedTxn = g.removedTxn, nil
	if g.txn == nil {
		g.txn = map[int64]map[TopicPartition]Offset{}
	}
	g.transition(g.removedState, c.clock.Now())
	st.groups[g.id] = g
	c.numGroups.Add(1)
	c.numTxnOffsets.Add(int64(g.numTxnOffsets()))
	c.schedule(s, g)
}
