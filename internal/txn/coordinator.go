// Package txn is sluice's transaction coordinator (Kafka's
// TransactionCoordinator): transactional producer ids and epochs
// (InitProducerId), the partitions of each ongoing transaction
// (AddPartitionsToTxn, AddOffsetsToTxn), its two-phase end (EndTxn, then
// WriteTxnMarkers to every partition's leader), transaction timeouts and
// transactional id expiration, with their state as Kafka-format records
// in the internal topic __transaction_state.
//
// A transactional id lives in partition PartitionFor(id) of
// __transaction_state and is served by that partition's leader. The
// coordinator runtime (internal/coord) runs one shard per partition led
// here: Elect loads it by replaying the partition, Resign drops it, and
// every request runs as an event on the shard's owner. Each transactional
// id's Metadata is a state machine that does no I/O (state.go); a change
// is applied only once its record is committed (the runtime's write).
// docs/transactions.md and docs/coordinators.md describe the whole.
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
	"github.com/sluice-io/sluice/internal/coord"
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
	// Stepped runs the coordinator without goroutines, for the
	// deterministic simulator (stepped.go): its runtime is stepped
	// (coord.Config.Stepped), Step runs its work, and the markers go
	// through StepMarkers.
	Stepped bool
	// StepMarkers sends a stepped coordinator's WriteTxnMarkers.
	StepMarkers StepSender
	// Knobs re-introduce bugs for the simulator's tests; never set in
	// production.
	Knobs Knobs
	// wrapReplica (tests) is the replica the runtime sees in place of
	// the broker's partition.
	wrapReplica func(*broker.Partition) logReplica
}

// shardState is the state machine of one __transaction_state partition,
// run by the coordinator runtime (internal/coord) on the partition's owner.
type shardState struct {
	txns map[string]*Metadata
	// changed is closed, and replaced, whenever a transition of one of
	// its ids becomes durable (notify): requests held while a
	// transaction completes wait on it.
	changed chan struct{}
	// loadTook is how long the replay took.
	loadTook time.Duration
}

// notify wakes the requests waiting for a transition (owner).
func (st *shardState) notify() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// shard is the runtime's shard of one __transaction_state partition: its
// methods other than Post, Stopped, Epoch and Partition run on its owner.
type shard = coord.Shard[*shardState]

// Coordinator serves the transactional ids of the __transaction_state
// partitions this node leads.
type Coordinator struct {
	b           *broker.Broker
	wrapReplica func(*broker.Partition) logReplica // Options.wrapReplica
	cfg         Config
	clock       clock.Clock
	log         *slog.Logger
	markers     MarkerSender
	queues      *markerQueues // the markers waiting per broker (batch.go)
	rt          *coord.Runtime[*shardState]

	createMu sync.Mutex // serializes creating __transaction_state

	mu            sync.Mutex // guards closed
	closed        bool
	numIDs        atomic.Int64
	work          sync.WaitGroup // marker senders and reconciliations started by timers
	waitingLogged atomic.Bool

	stepped bool
	knobs   Knobs
	steps   stepState // stepped.go
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
		markers: opts.Markers, stepped: opts.Stepped, knobs: opts.Knobs, wrapReplica: opts.wrapReplica}
	c.steps.sender = opts.StepMarkers
	c.queues = newMarkerQueues(c)
	c.rt = coord.New(coord.Config[*shardState]{
		Name: "txn", Clock: c.clock, Logger: c.log,
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

// reconcile elects every partition led here that has no shard and resigns
// shards whose partition is gone or led elsewhere. It waits for resigned
// shards' owners: an event must not call it.
func (c *Coordinator) reconcile() {
	for _, i := range c.rt.Partitions() {
		if !c.owns(i) {
			c.rt.Resign(i, -1)
		}
	}
	t := c.b.Image().Topics[Topic]
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
// local replica of its partition, at the leader epoch it loaded: a shard
// that missed a leadership change (this node led, another did, this one
// again) holds stale state and must be loaded again.
func (c *Coordinator) owns(i int32) bool {
	t := c.b.Image().Topics[Topic]
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

// replica returns the local replica of partition i; a stepped
// coordinator does not wait for lagging metadata (its caller owns the
// clock).
func (c *Coordinator) replica(i int32) (*broker.Partition, error) {
	if c.stepped {
		return c.b.PartitionBy(Topic, i, time.Time{})
	}
	return c.b.Partition(Topic, i)
}

// Elect makes this node the coordinator of __transaction_state partition
// i at its replica's leader epoch: its transactional ids are loaded in the
// background, and requests for them get COORDINATOR_LOAD_IN_PROGRESS
// until that is done.
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

// Resign stops coordinating partition i: its transactional ids are
// dropped, marker senders stop, waiting requests get NOT_COORDINATOR.
func (c *Coordinator) Resign(i int32) { c.rt.Resign(i, -1) }

// ResignAt is Resign for a leadership change at leader epoch epoch: a
// shard elected at a newer epoch stays. It does not wait for the shard's
// owner to finish (the broker's leadership listeners call it holding
// locks that a request being served may need).
func (c *Coordinator) ResignAt(i, epoch int32) { c.rt.ResignNoWait(i, epoch) }

// Close resigns every shard and stops the background work.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.rt.Close()
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

// logReplica is a coordinator replica with its log (a *broker.Partition).
type logReplica interface {
	coord.Replica
	Log() *storage.Log
}

// load replays partition i into transactional ids (the runtime's Load).
func (c *Coordinator) load(i int32, r coord.Replica) (*shardState, error) {
	p := r.(logReplica)
	start := c.clock.Now()
	// The leader's log is authoritative: load everything it has, as
	// Kafka's TransactionStateManager reads to the log end.
	l := loadLog(p.Log(), p.LogStartOffset(), p.LogEndOffset(), func(msg string, off int64, err error) {
		c.log.Error(msg, "partition", i, "offset", off, "err", err)
	})
	return &shardState{txns: l, changed: make(chan struct{}), loadTook: clock.Since(c.clock, start)}, nil
}

// loaded rolls forward every transaction found prepared (its markers are
// sent again) and arms the shard's periodic tasks (the runtime's Loaded).
func (c *Coordinator) loaded(s *shard) {
	st := s.State()
	c.numIDs.Add(int64(len(st.txns)))
	prepared := 0
	for _, m := range st.txns {
		if m.State == PrepareCommit || m.State == PrepareAbort {
			prepared++
		}
	}
	if prepared > 0 {
		c.rollForward(s)
	}
	c.armTimers(s)
	c.log.Info("loaded transactions", "partition", s.Partition(), "ids", len(st.txns), "prepared", prepared,
		"coordinator.epoch", s.Epoch(), "took", st.loadTook)
}

// rollForward sends the markers of the loaded prepared transactions once
// the log the load read is committed (owner): a prepare record above the
// high watermark may be missing at the coordinator elected next, which
// would then see the transaction ongoing and could end it the other way
// than the markers sent. Until then they answer CONCURRENT_TRANSACTIONS,
// as while their markers are written. A failed wait is tried again after
// the marker backoff while the shard is loaded.
func (c *Coordinator) rollForward(s *shard) {
	s.Read(func(err error) {
		if s.Gone() {
			return
		}
		if err != nil {
			c.log.Warn("waiting for the loaded transactions to be committed", "partition", s.Partition(), "err", err)
			s.Schedule("rollforward", s.Now().Add(c.cfg.MarkerBackoff), c.rollForward)
			return
		}
		for _, m := range s.State().txns {
			if m.pending == nil && (m.State == PrepareCommit || m.State == PrepareAbort) {
				c.startMarkers(s, m)
			}
		}
	})
}

// unloaded drops the shard's ids (the runtime's Unloaded).
func (c *Coordinator) unloaded(s *shard) {
	st := s.State()
	c.numIDs.Add(-int64(len(st.txns)))
	st.txns = map[string]*Metadata{}
}

// partition returns the partition of a transactional id, electing its
// shard if needed and creating __transaction_state on first use. Errors:
// COORDINATOR_NOT_AVAILABLE (no topic yet), NOT_COORDINATOR (led
// elsewhere).
func (c *Coordinator) partition(id string) (int32, *kerr.Error) {
	t, err := c.topic()
	if err != nil {
		return -1, err
	}
	i := PartitionFor(id, int32(len(t.Partitions)))
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

// run runs fn on the owner of id's shard: NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS if it cannot.
func (c *Coordinator) run(id string, fn func(s *shard)) *kerr.Error {
	i, err := c.partition(id)
	if err != nil {
		return err
	}
	if c.stepped {
		return c.runStepped(i, fn)
	}
	return runError(c.rt.Run(i, fn))
}

// runError maps the runtime's errors.
func runError(err error) *kerr.Error {
	switch err {
	case nil:
		return nil
	case coord.ErrLoading:
		return kerr.CoordinatorLoadInProgress
	}
	return kerr.NotCoordinator
}

// lockedShard is a shard whose owner is held in an event until
// mu.Unlock: the caller may read and change txns meanwhile (tests and
// tools).
type lockedShard struct {
	txns map[string]*Metadata
	mu   ownerHold
}

// ownerHold releases a held owner.
type ownerHold struct{ release chan struct{} }

// Unlock lets the owner go on.
func (h ownerHold) Unlock() { close(h.release) }

// lockShard holds the owner of id's shard in an event and returns its
// state; the caller calls mu.Unlock.
func (c *Coordinator) lockShard(id string) (*lockedShard, *kerr.Error) {
	i, err := c.partition(id)
	if err != nil {
		return nil, err
	}
	type held struct {
		ls  *lockedShard
		err error
	}
	ch := make(chan held, 1)
	release := make(chan struct{})
	go func() {
		err := c.rt.Run(i, func(s *shard) {
			ch <- held{ls: &lockedShard{txns: s.State().txns, mu: ownerHold{release}}}
			<-release
		})
		if err != nil {
			ch <- held{err: err}
		}
	}()
	h := <-ch
	if h.err != nil {
		return nil, runError(h.err)
	}
	return h.ls, nil
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
	if c.stepped {
		// The creation waits for the metadata, which a stepped
		// coordinator's caller moves: it creates the topic itself.
		return kerr.CoordinatorNotAvailable
	}
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
