// Package txn is sluice's transaction coordinator (Kafka's
// TransactionCoordinator): transactional producer ids and epochs
// (InitProducerId), the partitions of each ongoing transaction
// (AddPartitionsToTxn, AddOffsetsToTxn), its two-phase end (EndTxn, then
// WriteTxnMarkers to every partition's leader), transaction timeouts and
// transactional id expiration, with their state as Kafka-format records
// in the internal topic __transaction_state.
//
// A transactional id lives in partition PartitionFor(id) of
// __transaction_state and is served by that partition's leader. As the
// group coordinator does, the Coordinator owns "shards", one per partition
// it leads: Elect loads a shard by replaying the partition, Resign drops
// it. Each transactional id's Metadata is a state machine that does no
// I/O (state.go); a change is applied only once its record is durable.
// docs/transactions.md describes the whole.
package txn

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/storage"
)

// Hard limits, whatever the configuration says.
const (
	// MaxTransactionalIDs bounds the transactional ids of one coordinator.
	MaxTransactionalIDs = 100000
	// MaxPartitionsPerTxn bounds the partitions of one transaction.
	MaxPartitionsPerTxn = 10000
	// MaxTransactionalIDBytes bounds the length of a transactional id.
	MaxTransactionalIDBytes = 4096
)

// Config holds the coordinator settings, named after Kafka's broker configs.
type Config struct {
	NumPartitions     int32         // transaction.state.log.num.partitions (50)
	ReplicationFactor int16         // transaction.state.log.replication.factor (3, capped by live brokers)
	MinISR            int           // transaction.state.log.min.isr (2, capped by the replication factor)
	SegmentBytes      int64         // transaction.state.log.segment.bytes (100 MiB)
	MaxTimeout        time.Duration // transaction.max.timeout.ms (900000)
	IDExpiration      time.Duration // transactional.id.expiration.ms (604800000)
	AbortInterval     time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms (10000)
	RemoveInterval    time.Duration // transaction.remove.expired.transaction.cleanup.interval.ms (3600000)
	// OffsetsPartitions is offsets.topic.num.partitions, for
	// AddOffsetsToTxn before __consumer_offsets exists.
	OffsetsPartitions int32
	// MarkerBackoff is the first wait before a marker is retried (it
	// doubles up to a second).
	MarkerBackoff time.Duration
}

// ConfigFrom reads the coordinator settings from the broker configuration.
func ConfigFrom(b *config.Broker) Config {
	ms := func(name string, def int64) time.Duration {
		return time.Duration(b.Int(name, def)) * time.Millisecond
	}
	c := Config{
		NumPartitions:     int32(b.Int("transaction.state.log.num.partitions", 50)),
		ReplicationFactor: int16(b.Int("transaction.state.log.replication.factor", 3)),
		MinISR:            int(b.Int("transaction.state.log.min.isr", 2)),
		SegmentBytes:      b.Int("transaction.state.log.segment.bytes", 100<<20),
		MaxTimeout:        ms("transaction.max.timeout.ms", 900000),
		IDExpiration:      ms("transactional.id.expiration.ms", 604800000),
		AbortInterval:     ms("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000),
		RemoveInterval:    ms("transaction.remove.expired.transaction.cleanup.interval.ms", 3600000),
		OffsetsPartitions: int32(b.Int("offsets.topic.num.partitions", 50)),
		MarkerBackoff:     100 * time.Millisecond,
	}
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.OffsetsPartitions <= 0 {
		c.OffsetsPartitions = 50
	}
	c.MinISR = max(c.MinISR, 1)
	c.AbortInterval = max(c.AbortInterval, time.Millisecond)
	c.RemoveInterval = max(c.RemoveInterval, time.Millisecond)
	return c
}

// Options configure a Coordinator.
type Options struct {
	Config Config
	// Clock defaults to the broker's.
	Clock clock.Clock
	// Logger defaults to the broker's.
	Logger *slog.Logger
	// Markers sends WriteTxnMarkers; default: the broker's peer clients
	// (BrokerMarkers).
	Markers MarkerSender
}

// shard is the part of the coordinator serving one __transaction_state
// partition.
type shard struct {
	index int32

	mu      sync.Mutex
	p       *broker.Partition
	epoch   int32 // the coordinator epoch: the partition's leader epoch
	loading bool
	gone    bool
	txns    map[string]*Metadata
	// stop is closed when the shard is resigned: marker senders stop.
	stop chan struct{}
	// changed is closed, and replaced, whenever a transition of one of
	// its ids becomes durable (notify): requests held while a
	// transaction completes wait on it.
	changed chan struct{}
}

// notify wakes the requests waiting for a transition (s.mu held).
func (s *shard) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Coordinator serves the transactional ids of the __transaction_state
// partitions this node leads.
type Coordinator struct {
	b       *broker.Broker
	cfg     Config
	clock   clock.Clock
	log     *slog.Logger
	markers MarkerSender
	queues  *markerQueues // the markers waiting per broker (batch.go)

	createMu sync.Mutex // serializes creating __transaction_state

	mu            sync.Mutex // guards shards, closed and the timers; taken before any shard.mu
	shards        map[int32]*shard
	closed        bool
	abortStop     func() bool
	removeStop    func() bool
	numIDs        atomic.Int64
	work          sync.WaitGroup // loaders and marker senders
	waitingLogged atomic.Bool
}

// New returns a coordinator for b and elects every __transaction_state
// partition this node leads (loading them in the background).
func New(b *broker.Broker, opts Options) *Coordinator {
	if opts.Clock == nil {
		opts.Clock = b.Clock()
	}
	if opts.Logger == nil {
		opts.Logger = b.Logger()
	}
	if opts.Markers == nil {
		opts.Markers = BrokerMarkers{B: b}
	}
	if opts.Config.MarkerBackoff <= 0 {
		opts.Config.MarkerBackoff = 100 * time.Millisecond
	}
	c := &Coordinator{b: b, cfg: opts.Config, clock: opts.Clock, log: opts.Logger.With("component", "txn"),
		markers: opts.Markers, shards: map[int32]*shard{}}
	c.queues = newMarkerQueues(c)
	c.reconcile()
	return c
}

// Config returns the coordinator's configuration.
func (c *Coordinator) Config() Config { return c.cfg }

// reconcile elects every partition led here that has no shard and resigns
// shards whose partition is gone or led elsewhere.
func (c *Coordinator) reconcile() {
	t := c.b.Image().Topics[Topic]
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
// partition, at the leader epoch it loaded: a shard that missed a
// leadership change (this node led, another did, this one again) holds
// stale state and must be loaded again.
func (c *Coordinator) owns(s *shard) bool {
	t := c.b.Image().Topics[Topic]
	if t == nil || int(s.index) >= len(t.Partitions) || t.Partitions[s.index].Leader != c.b.NodeID() {
		return false
	}
	p, err := c.b.Partition(Topic, s.index)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loading || (s.p == p && s.epoch == p.LeaderEpoch())
}

// Elect makes this node the coordinator of __transaction_state partition
// i: its transactional ids are loaded in the background, and requests for
// them get COORDINATOR_LOAD_IN_PROGRESS until that is done.
func (c *Coordinator) Elect(i int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.shards[i]; s != nil && !c.owns(s) {
		c.resignLocked(i)
	}
	if c.shards[i] == nil && !c.closed {
		c.electLocked(i)
	}
}

func (c *Coordinator) electLocked(i int32) *shard {
	s := &shard{index: i, loading: true, txns: map[string]*Metadata{}, stop: make(chan struct{}), changed: make(chan struct{})}
	c.shards[i] = s
	c.armTimersLocked()
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		c.load(s)
	}()
	return s
}

// Resign stops coordinating partition i: its transactional ids are
// dropped, marker senders stop, waiting requests get NOT_COORDINATOR.
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
	if !s.gone {
		s.gone = true
		close(s.stop)
	}
	c.numIDs.Add(-int64(len(s.txns)))
	s.txns = map[string]*Metadata{}
}

// Close resigns every shard and stops the background work.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	for i := range c.shards {
		c.resignLocked(i)
	}
	for _, stop := range []func() bool{c.abortStop, c.removeStop} {
		if stop != nil {
			stop()
		}
	}
	c.abortStop, c.removeStop = nil, nil
	c.mu.Unlock()
	c.queues.cancel()
	c.work.Wait()
}

// loadLog replays log's records in [from, end) into a new loaded state,
// reporting errors to logErr and going on past bad records.
func loadLog(log *storage.Log, from, end int64, logErr func(msg string, off int64, err error)) loaded {
	l := loaded{}
	for off := from; off < end; {
		sl, err := log.Read(off, 1<<20, end)
		if err != nil {
			logErr("loading transactions", off, err)
			break
		}
		data, err := sl.AppendTo(nil)
		if err != nil || len(data) == 0 {
			if err != nil {
				logErr("loading transactions", off, err)
			}
			break
		}
		next, err := l.decodeBatches(data)
		if err != nil {
			logErr("loading transactions: bad record", off, err)
		}
		if next <= off {
			break
		}
		off = next
	}
	return l
}

// load replays partition s.index into transactional ids, then rolls
// forward every transaction found prepared (its markers are sent again).
func (c *Coordinator) load(s *shard) {
	p, err := c.b.Partition(Topic, s.index)
	if err != nil {
		c.Resign(s.index)
		return
	}
	start := c.clock.Now()
	// The leader's log is authoritative: load everything it has, as
	// Kafka's TransactionStateManager reads to the log end.
	l := loadLog(p.Log(), p.LogStartOffset(), p.LogEndOffset(), func(msg string, off int64, err error) {
		c.log.Error(msg, "partition", s.index, "offset", off, "err", err)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return
	}
	s.txns = l
	c.numIDs.Add(int64(len(l)))
	s.p, s.epoch, s.loading = p, p.LeaderEpoch(), false
	prepared := 0
	for _, m := range s.txns {
		if m.State == PrepareCommit || m.State == PrepareAbort {
			prepared++
			c.startMarkers(s, m)
		}
	}
	c.log.Info("loaded transactions", "partition", s.index, "ids", len(s.txns), "rolled.forward", prepared,
		"coordinator.epoch", s.epoch, "took", clock.Since(c.clock, start))
}

// shardFor returns the shard of a transactional id, creating
// __transaction_state on first use. Errors: COORDINATOR_NOT_AVAILABLE (no
// topic yet), NOT_COORDINATOR (led elsewhere).
func (c *Coordinator) shardFor(id string) (*shard, *kerr.Error) {
	t, err := c.topic()
	if err != nil {
		return nil, err
	}
	i := PartitionFor(id, int32(len(t.Partitions)))
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

// lockShard is shardFor plus the shard's lock, failing while it loads
// (COORDINATOR_LOAD_IN_PROGRESS). The caller unlocks s.mu.
func (c *Coordinator) lockShard(id string) (*shard, *kerr.Error) {
	s, err := c.shardFor(id)
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
		return nil, kerr.CoordinatorLoadInProgress
	}
	return s, nil
}

// topic returns __transaction_state, creating it if needed.
func (c *Coordinator) topic() (*metadata.Topic, *kerr.Error) {
	t := c.b.Image().Topics[Topic]
	if t == nil {
		if c.createTopic() != nil {
			return nil, kerr.CoordinatorNotAvailable
		}
		c.reconcile()
		if t = c.b.Image().Topics[Topic]; t == nil {
			return nil, kerr.CoordinatorNotAvailable
		}
	}
	if len(t.Partitions) == 0 {
		return nil, kerr.CoordinatorNotAvailable
	}
	return t, nil
}

// Coordinator returns the node coordinating a transactional id (the
// leader of its partition), creating __transaction_state on first use.
func (c *Coordinator) Coordinator(id string) (nodeID int32, err *kerr.Error) {
	t, err := c.topic()
	if err != nil {
		return -1, err
	}
	leader := t.Partitions[PartitionFor(id, int32(len(t.Partitions)))].Leader
	if _, ok := c.b.Image().Brokers[leader]; !ok {
		return -1, kerr.CoordinatorNotAvailable
	}
	return leader, nil
}

// createTopic creates __transaction_state: compacted, its replication
// factor transaction.state.log.replication.factor capped by the known
// brokers (and not created while fewer are active, as Kafka does), its
// min.insync.replicas transaction.state.log.min.isr capped by that.
func (c *Coordinator) createTopic() error {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	img := c.b.Image()
	if img.Topics[Topic] != nil {
		return nil
	}
	rf, ok := replicationFactor(c.cfg.ReplicationFactor, img.Brokers, len(c.b.Config().Voters))
	if !ok {
		if !c.waitingLogged.Swap(true) {
			c.log.Info("not creating "+Topic+" until enough brokers are active", "replication.factor", rf)
		}
		return kerr.CoordinatorNotAvailable
	}
	configs := map[string]string{
		"cleanup.policy":      "compact",
		"retention.ms":        "-1",
		"segment.bytes":       strconv.FormatInt(c.cfg.SegmentBytes, 10),
		"min.insync.replicas": strconv.Itoa(min(c.cfg.MinISR, int(rf))),
	}
	err := c.b.CreateTopic(Topic, c.cfg.NumPartitions, rf, configs, false)
	if err != nil && err != kerr.TopicAlreadyExists {
		c.log.Error("creating "+Topic, "err", err)
		return err
	}
	return nil
}

// replicationFactor caps the configured replication factor by the brokers
// the cluster is known to have (registered ones, and at least the
// controller voters); ok is false while fewer than that are active (the
// rule of the group coordinator's __consumer_offsets).
func replicationFactor(configured int16, brokers map[int32]metadata.Broker, voters int) (rf int16, ok bool) {
	known := max(len(brokers), voters, 1)
	rf = int16(max(min(int(configured), known), 1))
	active := 0
	for _, b := range brokers {
		if b.Active() {
			active++
		}
	}
	return rf, active >= int(rf)
}

// NumTransactionalIDs is the number of transactional ids loaded here.
func (c *Coordinator) NumTransactionalIDs() int { return int(c.numIDs.Load()) }
