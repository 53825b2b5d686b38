// Package sharecoord is sluice's share coordinator (Kafka's
// ShareCoordinator, KIP-932 "share-group state persistence"): the durable
// state of every share partition (a share group reading one partition),
// kept as Kafka-format records in the internal topic __share_group_state
// and served to the share partition leaders through the inter-broker RPCs
// InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
// DeleteShareGroupState and ReadShareGroupStateSummary.
//
// A share partition's state lives in partition PartitionFor(CoordinatorKey)
// of __share_group_state and is served by that partition's leader. The
// coordinator runtime (internal/coord) runs one shard per partition led
// here (a State, state.go): Elect loads it by replaying the partition,
// Resign drops it, and every request runs as an event on the shard's
// owner, answered only once its records are committed. The Persister
// (persister.go) is the client side the share partitions use.
// docs/share-groups.md ("Durable state") and docs/coordinators.md describe
// the whole.
package sharecoord

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/coord"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/storage"
)

// Config holds the coordinator settings, named after Kafka's broker
// configs (ShareCoordinatorConfig).
type Config struct {
	NumPartitions     int32 // share.coordinator.state.topic.num.partitions (50)
	ReplicationFactor int16 // share.coordinator.state.topic.replication.factor (3, capped by live brokers)
	MinISR            int   // share.coordinator.state.topic.min.isr (2, capped by the replication factor)
	SegmentBytes      int64 // share.coordinator.state.topic.segment.bytes (100 MiB)
	// SnapshotUpdateRecords is
	// share.coordinator.snapshot.update.records.per.snapshot (500): the
	// update records of a share partition between two snapshots.
	SnapshotUpdateRecords int
	// PruneInterval is share.coordinator.state.topic.prune.interval.ms
	// (300000): how often the records no share partition needs are
	// deleted (prune.go); 0 never.
	PruneInterval time.Duration
}

// ConfigFrom reads the coordinator settings from the broker configuration.
func ConfigFrom(b *config.Broker) Config {
	c := Config{
		NumPartitions:         int32(b.Int("share.coordinator.state.topic.num.partitions", 50)),
		ReplicationFactor:     int16(b.Int("share.coordinator.state.topic.replication.factor", 3)),
		MinISR:                int(b.Int("share.coordinator.state.topic.min.isr", 2)),
		SegmentBytes:          b.Int("share.coordinator.state.topic.segment.bytes", 100<<20),
		SnapshotUpdateRecords: int(b.Int("share.coordinator.snapshot.update.records.per.snapshot", 500)),
		PruneInterval:         time.Duration(b.Int("share.coordinator.state.topic.prune.interval.ms", 300000)) * time.Millisecond,
	}
	return c.withDefaults()
}

func (c Config) withDefaults() Config {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.ReplicationFactor <= 0 {
		c.ReplicationFactor = 3
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 100 << 20
	}
	c.MinISR = max(c.MinISR, 1)
	c.SnapshotUpdateRecords = max(c.SnapshotUpdateRecords, 0)
	c.PruneInterval = max(c.PruneInterval, 0)
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

// shard is the runtime's shard of one __share_group_state partition.
type shard = coord.Shard[*State]

// Coordinator serves the share partition states of the
// __share_group_state partitions this node leads. Its methods Initialize,
// Read, Write, Delete and ReadSummary serve only keys coordinated here
// (NOT_COORDINATOR otherwise): it is the server side of the Persister.
type Coordinator struct {
	b     *broker.Broker
	cfg   Config
	clock clock.Clock
	log   *slog.Logger
	rt    *coord.Runtime[*State]

	createMu      sync.Mutex // serializes creating __share_group_state
	mu            sync.Mutex // guards closed
	closed        bool
	waitingLogged atomic.Bool
	wrapReplica   func(*broker.Partition) logReplica // Options.wrapReplica
}

// New returns a coordinator for b and elects every __share_group_state
// partition this node leads (loading them in the background).
func New(b *broker.Broker, opts Options) *Coordinator {
	if opts.Clock == nil {
		opts.Clock = b.Clock()
	}
	if opts.Logger == nil {
		opts.Logger = b.Logger()
	}
	c := &Coordinator{b: b, cfg: opts.Config.withDefaults(), clock: opts.Clock, log: opts.Logger.With("component", "sharecoord"),
		wrapReplica: opts.wrapReplica}
	c.rt = coord.New(coord.Config[*State]{
		Name: "share", Clock: c.clock, Logger: c.log,
		Replica: func(i int32) (coord.Replica, error) {
			p, err := b.Partition(Topic, i)
			if err != nil {
				return nil, err
			}
			if c.wrapReplica != nil {
				return c.wrapReplica(p), nil
			}
			return p, nil
		},
		Load: c.load, Loaded: c.armPrune, Stepped: opts.Stepped,
	})
	c.reconcile()
	return c
}

// Config returns the coordinator's configuration.
func (c *Coordinator) Config() Config { return c.cfg }

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// reconcile elects every partition led here that has no shard and resigns
// shards whose partition is gone or led elsewhere.
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

// owns reports whether the shard of partition i serves the live local
// replica of its partition at the leader epoch it loaded.
func (c *Coordinator) owns(i int32) bool {
	t := c.b.Image().Topics[Topic]
	if t == nil || int(i) >= len(t.Partitions) || t.Partitions[i].Leader != c.b.NodeID() {
		return false
	}
	p, err := c.b.Partition(Topic, i)
	if err != nil {
		return false
	}
	if c.wrapReplica != nil {
		return c.rt.Current(i, c.wrapReplica(p))
	}
	return c.rt.Current(i, p)
}

// ElectAt makes this node the coordinator of partition i at leader epoch
// epoch (negative: the replica's); an election older than the shard's is
// ignored. Requests get COORDINATOR_LOAD_IN_PROGRESS until it is loaded.
func (c *Coordinator) ElectAt(i, epoch int32) {
	if c.isClosed() {
		return
	}
	c.rt.Reelect(i, epoch, func() bool { return c.owns(i) })
}

// ResignAt stops coordinating partition i for a leadership change at
// leader epoch epoch, without waiting for the shard's owner.
func (c *Coordinator) ResignAt(i, epoch int32) { c.rt.ResignNoWait(i, epoch) }

// Close resigns every shard.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.rt.Close()
}

// load replays partition i (the runtime's Load): the leader's log, from
// its start to its end.
func (c *Coordinator) load(i int32, r coord.Replica) (*State, error) {
	p := r.(logReplica)
	st := NewState(c.cfg.SnapshotUpdateRecords)
	n := replayLog(p.Log(), p.LogStartOffset(), p.LogEndOffset(), st, func(off int64, err error) {
		c.log.Error("loading share state", "partition", i, "offset", off, "err", err)
	})
	c.log.Info("loaded share state", "partition", i, "records", n, "share.partitions", st.Len())
	return st, nil
}

// replayLog applies the records of log in [from, end) to st and returns
// how many it applied; records that do not parse are reported and
// skipped.
func replayLog(log *storage.Log, from, end int64, st *State, logErr func(off int64, err error)) int {
	n := 0
	for off := from; off < end; {
		sl, err := log.Read(off, 1<<20, end)
		if err != nil {
			logErr(off, err)
			break
		}
		data, err := sl.AppendTo(nil)
		if err != nil || len(data) == 0 {
			if err != nil {
				logErr(off, err)
			}
			break
		}
		next := off
		for len(data) > 0 {
			h, b, rest, err := batch.Next(data)
			if err != nil {
				logErr(next, err)
				break
			}
			data = rest
			next = h.NextOffset()
			if h.IsControl() {
				continue
			}
			err = batch.Records(b, func(r batch.Record) bool {
				var value []byte
				if r.Value != nil {
					value = append([]byte{}, r.Value...)
				}
				rec, err := DecodeRecord(append([]byte{}, r.Key...), value)
				if err != nil {
					logErr(h.BaseOffset, err)
					return true
				}
				rec.Offset = h.BaseOffset + int64(r.OffsetDelta)
				st.Apply(rec)
				n++
				return true
			})
			if err != nil {
				logErr(h.BaseOffset, err)
			}
		}
		if next <= off {
			break
		}
		off = next
	}
	return n
}

// encode builds one record batch of recs.
func encode(recs []Record, nowMs int64) []byte {
	kvs := make([]batch.KV, len(recs))
	for i := range recs {
		kvs[i] = batch.KV{Key: recs[i].EncodeKey(), Value: recs[i].EncodeValue()}
	}
	return batch.Encode(kvs, nowMs, batch.NoProducer)
}

// topic returns __share_group_state, creating it if needed.
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

// Coordinator returns the node coordinating a coordinator key
// ("group:topicId:partition"), creating __share_group_state on first use.
func (c *Coordinator) Coordinator(key string) (nodeID int32, err *kerr.Error) {
	t, err := c.topic()
	if err != nil {
		return -1, err
	}
	leader := t.Partitions[PartitionFor(key, int32(len(t.Partitions)))].Leader
	if _, ok := c.b.Image().Brokers[leader]; !ok {
		return -1, kerr.CoordinatorNotAvailable
	}
	return leader, nil
}

// createTopic creates __share_group_state. Its cleanup policy is delete
// with no time or size retention, as Kafka's
// ShareCoordinatorService.shareGroupStateTopicConfigs ("as defined in
// KIP-932"): compaction would keep only the last ShareUpdate of a share
// partition and lose the ones before it. The replication factor is
// share.coordinator.state.topic.replication.factor capped by the known
// brokers (not created while fewer are active), min.insync.replicas
// share.coordinator.state.topic.min.isr capped by that.
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
		"cleanup.policy":      "delete",
		"retention.ms":        "-1",
		"retention.bytes":     "-1",
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
// the cluster is known to have; ok is false while fewer are active (the
// rule of the group and transaction coordinators).
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

// partition returns the partition of key, electing its shard if needed.
func (c *Coordinator) partition(key share.Key) (int32, *kerr.Error) {
	t, err := c.topic()
	if err != nil {
		return -1, err
	}
	i := PartitionFor(CoordinatorKey(key), int32(len(t.Partitions)))
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

// runError maps the runtime's errors.
func runError(err error) error {
	switch err {
	case nil:
		return nil
	case coord.ErrLoading:
		return kerr.CoordinatorLoadInProgress
	}
	return kerr.NotCoordinator
}

// appendError maps a failed append or replication to the coordinator's
// answer, as the group coordinator does (CoordinatorRuntime's
// Errors mapping: a partition error becomes NOT_COORDINATOR or
// COORDINATOR_NOT_AVAILABLE, which the caller retries).
func appendError(err error) error {
	if err == coord.ErrNotCoordinator {
		return kerr.NotCoordinator
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.UnknownServerError
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return kerr.UnknownServerError
	}
	return ke
}

// do runs op on the owner of key's shard and waits for its answer: op
// calls reply exactly once, on the owner or later (after a commit).
func (c *Coordinator) do(ctx context.Context, key share.Key, op func(s *shard, reply func(error))) error {
	i, kerr := c.partition(key)
	if kerr != nil {
		return kerr
	}
	ch := make(chan error, 1)
	if err := c.rt.Run(i, func(s *shard) { op(s, func(err error) { ch <- err }) }); err != nil {
		return runError(err)
	}
	return c.wait(ctx, ch)
}

// wait waits for an operation's answer on ch or for ctx to end.
func (c *Coordinator) wait(ctx context.Context, ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// write appends recs, all of key (owner), applies them once appended
// with an undo that restores the key's previous state, and calls reply
// once they are committed, or with the error if the append or the commit
// fails.
func (c *Coordinator) write(s *shard, key share.Key, recs []Record, reply func(error)) {
	st := s.State()
	prev, had := st.entries[key]
	undo := func() {
		if had {
			st.entries[key] = prev
		} else {
			delete(st.entries, key)
		}
	}
	fl := st.pending[key]
	if fl == nil {
		fl = &inflight{base: prev}
		st.pending[key] = fl
	}
	fl.n++
	info, err := s.Append(encode(recs, c.clock.Now().UnixMilli()), undo, func(err error) {
		c.settle(st, key, fl, err)
		if err != nil {
			reply(appendError(err))
			return
		}
		reply(nil)
	})
	if err != nil {
		c.settle(st, key, fl, err)
		reply(appendError(err))
		return
	}
	for i := range recs {
		recs[i].Offset = info.FirstOffset + int64(i)
		st.Apply(recs[i])
	}
}

// settle counts a write of key as done (owner) and, once none is in
// flight, answers the reads that waited for them.
func (c *Coordinator) settle(st *State, key share.Key, fl *inflight, err error) {
	fl.n--
	if fl.n > 0 {
		return
	}
	if st.pending[key] == fl {
		delete(st.pending, key)
	}
	ws := fl.waiters
	fl.waiters = nil
	for _, w := range ws {
		w(err)
	}
}

// afterPending calls fn once key's writes in flight are committed (at
// once if there are none), with the error of the last if it failed.
func afterPending(st *State, key share.Key, fn func(error)) {
	if fl := st.pending[key]; fl != nil && fl.n > 0 {
		fl.waiters = append(fl.waiters, fn)
		return
	}
	fn(nil)
}

// known reports whether key's topic partition is in the metadata: Kafka's
// share coordinator answers a read or write of any other with
// UNKNOWN_TOPIC_OR_PARTITION (ShareCoordinatorShard).
func (c *Coordinator) known(key share.Key) bool {
	t := c.b.Image().TopicByID(metadata.UUID(key.TopicID))
	return t != nil && key.Partition >= 0 && int(key.Partition) < len(t.Partitions)
}

// Initialize implements share.Persister for a key coordinated here.
func (c *Coordinator) Initialize(ctx context.Context, key share.Key, stateEpoch int32, startOffset int64) error {
	return c.do(ctx, key, c.initializeOp(key, stateEpoch, startOffset))
}

// initializeOp is Initialize's event.
func (c *Coordinator) initializeOp(key share.Key, stateEpoch int32, startOffset int64) func(s *shard, reply func(error)) {
	return func(s *shard, reply func(error)) {
		recs, kerr := s.State().InitializeRecords(key, stateEpoch, startOffset, c.clock.Now().UnixMilli())
		if kerr != nil {
			reply(kerr)
			return
		}
		c.write(s, key, recs, reply)
	}
}

// Write implements share.Persister for a key coordinated here;
// UNKNOWN_TOPIC_OR_PARTITION for a partition not in the metadata.
func (c *Coordinator) Write(ctx context.Context, key share.Key, st share.State) error {
	if !c.known(key) {
		return kerr.UnknownTopicOrPartition
	}
	return c.do(ctx, key, c.writeOp(key, st))
}

// writeOp is Write's event.
func (c *Coordinator) writeOp(key share.Key, st share.State) func(s *shard, reply func(error)) {
	return func(s *shard, reply func(error)) {
		recs, kerr := s.State().WriteRecords(key, st, c.clock.Now().UnixMilli())
		if kerr != nil {
			reply(kerr)
			return
		}
		c.write(s, key, recs, reply)
	}
}

// readCommitted runs the read op on the owner once what the shard shows is
// committed (coord.Shard.Readable, Shard.Read): a state a load read above
// the high watermark, which a coordinator elected next may not have, is
// never answered (Kafka's CoordinatorRuntime reads at the last committed
// offset). The writes in flight of the key itself are waited for by op
// (afterPending).
func readCommitted(s *shard, op func(s *shard, reply func(error)), reply func(error)) {
	if s.Readable() {
		op(s, reply)
		return
	}
	s.Read(func(err error) {
		if err != nil {
			reply(appendError(err))
			return
		}
		op(s, reply)
	})
}

// Read implements share.Persister for a key coordinated here
// (UNKNOWN_TOPIC_OR_PARTITION for a partition not in the metadata): it answers
// the committed state (readCommitted), and records leaderEpoch if it is
// newer than the key's (an update record, committed before the answer).
func (c *Coordinator) Read(ctx context.Context, key share.Key, leaderEpoch int32) (share.State, error) {
	if !c.known(key) {
		return share.State{}, kerr.UnknownTopicOrPartition
	}
	var out share.State
	err := c.do(ctx, key, func(s *shard, reply func(error)) { readCommitted(s, c.readOp(key, leaderEpoch, &out), reply) })
	if err != nil {
		return share.State{}, err
	}
	return out, nil
}

// readOp is Read's event: it sets *out before calling reply.
func (c *Coordinator) readOp(key share.Key, leaderEpoch int32, out *share.State) func(s *shard, reply func(error)) {
	return func(s *shard, reply func(error)) {
		st := s.State()
		recs, kerr := st.ReadRecords(key, leaderEpoch)
		if kerr != nil {
			reply(kerr)
			return
		}
		if got, ok := st.Get(key); ok {
			*out = got
			if len(recs) > 0 {
				out.LeaderEpoch = leaderEpoch
			}
		} else {
			*out = Uninitialized
		}
		if len(recs) > 0 {
			c.write(s, key, recs, reply)
			return
		}
		afterPending(st, key, reply)
	}
}

// Delete implements share.Persister for a key coordinated here.
func (c *Coordinator) Delete(ctx context.Context, key share.Key) error {
	return c.do(ctx, key, func(s *shard, reply func(error)) {
		st := s.State()
		recs := st.DeleteRecords(key)
		if len(recs) == 0 {
			afterPending(st, key, reply)
			return
		}
		c.write(s, key, recs, reply)
	})
}

// ReadSummary implements share.Persister for a key coordinated here:
// the committed state's summary (readCommitted), without fencing.
func (c *Coordinator) ReadSummary(ctx context.Context, key share.Key) (share.Summary, error) {
	var out share.Summary
	err := c.do(ctx, key, func(s *shard, reply func(error)) {
		readCommitted(s, func(s *shard, reply func(error)) {
			st := s.State()
			got, ok := st.Get(key)
			if !ok {
				got = Uninitialized
			}
			out = share.Summary{StateEpoch: got.StateEpoch, LeaderEpoch: got.LeaderEpoch, StartOffset: got.StartOffset,
				DeliveryCompleteCount: got.DeliveryCompleteCount}
			afterPending(st, key, reply)
		}, reply)
	})
	if err != nil {
		return share.Summary{}, err
	}
	return out, nil
}
