// Package coord is sluice's coordinator runtime (Kafka 4's
// coordinator-common CoordinatorRuntime): it runs the in-memory state
// machine of every partition of an internal coordinator topic
// (__consumer_offsets, __transaction_state) that this node leads, one
// Shard per partition, each with one owner goroutine that runs the
// shard's events one at a time.
//
// An event (Run, Post, a timer) runs on the owner against the shard's
// state S. A write is an event that appends records (Shard.Append): the
// runtime appends them through the partition's replica, tracks them until
// the high watermark passes them (then calls their done callback on the
// owner) and, if the append or its commit fails, rolls the state back to
// the last committed offset by running the writes' undo functions, newest
// first. Loading (Elect) replays the partition into a new state, recorded
// with the leader epoch it was elected at; unloading (Resign) drops it. A
// Resign or Elect older than the shard's epoch is ignored. In stepped mode
// (Config.Stepped, step.go) no goroutine runs: Runtime.Step runs the work.
// docs/coordinators.md describes the model.
package coord

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/storage"
)

// Errors of the runtime; coordinators map them to their protocol errors.
var (
	// ErrNotCoordinator: no shard for the partition here, or it was
	// unloaded before the event ran or its write was committed.
	ErrNotCoordinator = errors.New("coord: not the coordinator of this partition")
	// ErrLoading: the shard is still replaying its partition.
	ErrLoading = errors.New("coord: coordinator shard loading")
)

// Replica is what the runtime needs of a coordinator partition's local
// replica (broker.Partition implements it).
type Replica interface {
	// Append appends one encoded record batch as the leader (the
	// partition checks min.insync.replicas) without waiting for it to be
	// replicated.
	Append(batch []byte, now time.Time) (storage.AppendInfo, error)
	// Commit waits until every offset below end is committed (below the
	// high watermark); it fails when leadership is lost or after a
	// timeout.
	Commit(end int64) error
	// HighWatermark is the first offset not yet committed.
	HighWatermark() int64
	// LeaderEpoch is the replica's current leader epoch.
	LeaderEpoch() int32
	// LogStartOffset and LogEndOffset bound the log.
	LogStartOffset() int64
	LogEndOffset() int64
}

// Config configures a Runtime for a state machine S.
type Config[S any] struct {
	// Name labels the metrics and logs ("group", "txn").
	Name string
	// Clock drives timers and the time given to appends.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Replica returns the local replica of partition part.
	Replica func(part int32) (Replica, error)
	// Load builds a shard's state by replaying its partition. It runs on
	// the shard's owner (for an empty log, inside Elect) and must not call
	// the runtime.
	Load func(part int32, r Replica) (S, error)
	// Loaded, if set, runs on the owner once the state is loaded, before
	// any other event of the shard.
	Loaded func(s *Shard[S])
	// Unloaded, if set, runs on the owner when the shard is unloaded,
	// after its timers stopped and its pending writes got
	// ErrNotCoordinator. Shard.Append fails from then on.
	Unloaded func(s *Shard[S])
	// Stepped runs the shards without goroutines: their work waits for
	// Runtime.Step (step.go), for the deterministic simulator.
	Stepped bool
}

// Runtime runs the shards of one coordinator.
type Runtime[S any] struct {
	cfg Config[S]
	log *slog.Logger

	queueTime, procTime, batchRecords, batchBytes, loadTime prometheus.Observer
	rollbacks                                               prometheus.Counter

	mu     sync.Mutex // guards shards and closed; taken before any Shard.mu
	shards map[int32]*Shard[S]
	closed bool
	owners sync.WaitGroup
	// Stepped mode: shards unloaded but not yet finished (rt.mu), and
	// the partition Step ran last (the stepper's).
	dying       []*Shard[S]
	lastStepped int32
}

// New returns a runtime with no shards.
func New[S any](cfg Config[S]) *Runtime[S] {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Runtime[S]{cfg: cfg, log: cfg.Logger, shards: map[int32]*Shard[S]{}, lastStepped: -1,
		queueTime:    metrics.CoordEventQueueSeconds.WithLabelValues(cfg.Name),
		procTime:     metrics.CoordEventSeconds.WithLabelValues(cfg.Name),
		batchRecords: metrics.CoordBatchRecords.WithLabelValues(cfg.Name),
		batchBytes:   metrics.CoordBatchBytes.WithLabelValues(cfg.Name),
		loadTime:     metrics.CoordLoadSeconds.WithLabelValues(cfg.Name),
		rollbacks:    metrics.CoordRollbacks.WithLabelValues(cfg.Name),
	}
}

// Elect loads partition part at leader epoch epoch (a negative epoch: the
// replica's current one) and reports whether it started a load. A shard
// already loaded (or loading) at that epoch from the same replica stays;
// one at an older epoch, or of another replica, is unloaded first; an
// Elect older than the shard's epoch is ignored. An empty partition is
// loaded at once; any other loads on the shard's owner, and events get
// ErrLoading until it is done.
func (rt *Runtime[S]) Elect(part, epoch int32) bool {
	r, err := rt.cfg.Replica(part)
	if err != nil {
		return false
	}
	if epoch < 0 {
		epoch = r.LeaderEpoch()
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return false
	}
	if s := rt.shards[part]; s != nil {
		if s.epoch > epoch || (s.epoch == epoch && s.r == r) {
			return false
		}
		rt.unloadLocked(s)
	}
	s := newShard(rt, part, epoch, r)
	rt.shards[part] = s
	if r.LogEndOffset() <= r.LogStartOffset() {
		// Nothing to replay: serve at once.
		start := time.Now()
		st, err := rt.cfg.Load(part, r)
		rt.loadTime.Observe(time.Since(start).Seconds())
		if err != nil {
			rt.log.Error("loading coordinator shard", "coordinator", rt.cfg.Name, "partition", part, "err", err)
			delete(rt.shards, part)
			return false
		}
		s.state, s.loading = st, false
	}
	if !rt.cfg.Stepped {
		rt.owners.Add(1)
		go s.run()
	}
	return true
}

// Resign unloads partition part if its shard's epoch is at most epoch (a
// negative epoch: whatever its epoch), and reports whether it did: a
// Resign older than the shard's election is ignored. The shard's waiting
// events and pending writes get ErrNotCoordinator on its owner, and
// Resign returns once the owner is done (so an event must not call it:
// it calls Shard.Unload).
func (rt *Runtime[S]) Resign(part, epoch int32) bool {
	s := rt.resign(part, epoch)
	if s == nil {
		return false
	}
	if !rt.cfg.Stepped { // a stepped shard's unload finishes at the next Step
		<-s.exited
	}
	return true
}

// ResignNoWait is Resign without waiting for the owner: for callers that
// hold locks an event may need (the broker's leadership listeners).
func (rt *Runtime[S]) ResignNoWait(part, epoch int32) bool { return rt.resign(part, epoch) != nil }

func (rt *Runtime[S]) resign(part, epoch int32) *Shard[S] {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	s := rt.shards[part]
	if s == nil || (epoch >= 0 && s.epoch > epoch) {
		return nil
	}
	rt.unloadLocked(s)
	return s
}

// unloadLocked removes s and tells its owner to stop (rt.mu held).
func (rt *Runtime[S]) unloadLocked(s *Shard[S]) {
	if rt.shards[s.part] == s {
		delete(rt.shards, s.part)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.gone {
		s.gone = true
		close(s.stop)
		s.signal()
		if rt.cfg.Stepped {
			rt.dying = append(rt.dying, s)
		}
	}
}

// Close unloads every shard and waits for their owners to stop.
func (rt *Runtime[S]) Close() {
	rt.mu.Lock()
	rt.closed = true
	for _, s := range rt.shards {
		rt.unloadLocked(s)
	}
	dying := rt.dying
	rt.dying = nil
	rt.mu.Unlock()
	for _, s := range dying { // stepped: the caller is the owner
		s.finishUnload()
	}
	rt.owners.Wait()
}

// ShardInfo is what Info reports of a shard.
type ShardInfo struct {
	Epoch   int32   // the leader epoch it was elected at
	Replica Replica // the replica it appends through
	Loading bool    // still replaying
}

// Info reports the shard of partition part, if there is one.
func (rt *Runtime[S]) Info(part int32) (ShardInfo, bool) {
	rt.mu.Lock()
	s := rt.shards[part]
	rt.mu.Unlock()
	if s == nil {
		return ShardInfo{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return ShardInfo{Epoch: s.epoch, Replica: s.r, Loading: s.loading}, true
}

// Current reports whether partition part's shard is loading, or loaded on
// replica r at r's leader epoch now: the shard serves this leadership
// and not an earlier one.
func (rt *Runtime[S]) Current(part int32, r Replica) bool {
	info, ok := rt.Info(part)
	return ok && (info.Loading || (info.Replica == r && info.Epoch == r.LeaderEpoch()))
}

// Reelect is a coordinator's Elect at leader epoch epoch (negative: the
// replica's own): a shard that owned reports no longer current (an
// earlier leadership of this node) is unloaded first, then partition part
// is elected (an election older than the shard's is ignored).
func (rt *Runtime[S]) Reelect(part, epoch int32, owned func() bool) {
	if _, ok := rt.Info(part); ok && epoch < 0 && !owned() {
		rt.Resign(part, -1)
	}
	rt.Elect(part, epoch)
}

// Partitions lists the partitions with a shard (loaded or loading).
func (rt *Runtime[S]) Partitions() []int32 {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]int32, 0, len(rt.shards))
	for p := range rt.shards {
		out = append(out, p)
	}
	return out
}

func (rt *Runtime[S]) shard(part int32) *Shard[S] {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.shards[part]
}

// Run runs fn on the owner of partition part's shard and returns once it
// ran: ErrNotCoordinator if there is no shard or it is unloaded first,
// ErrLoading while it loads. fn must not call Run for the same shard (it
// would wait for itself).
func (rt *Runtime[S]) Run(part int32, fn func(*Shard[S])) error {
	s := rt.shard(part)
	if s == nil {
		return ErrNotCoordinator
	}
	ev := &event[S]{fn: fn, done: make(chan error, 1)}
	if err := s.enqueue(ev, false); err != nil {
		return err
	}
	return <-ev.done
}

// Post queues fn on the owner of partition part's shard without waiting;
// while the shard loads it waits in the queue and runs once the shard is
// loaded. It fails with ErrNotCoordinator if there is no shard.
func (rt *Runtime[S]) Post(part int32, fn func(*Shard[S])) error {
	s := rt.shard(part)
	if s == nil {
		return ErrNotCoordinator
	}
	return s.Post(fn)
}

// Write runs fn on the owner of partition part as a write event: fn
// returns the records to append (one encoded batch; nil appends nothing),
// the undo of the state change it made, and its response. The response is
// returned once the batch is committed; if the append or its commit
// fails, undo runs (with every later uncommitted write's) and the error is
// returned.
func Write[S, R any](rt *Runtime[S], part int32, fn func(*Shard[S]) (batch []byte, undo func(), resp R, err error)) (R, error) {
	var resp R
	committed := make(chan error, 1)
	var ferr error
	err := rt.Run(part, func(s *Shard[S]) {
		var batch []byte
		var undo func()
		batch, undo, resp, ferr = fn(s)
		if ferr != nil {
			return
		}
		if batch == nil {
			committed <- nil
			return
		}
		if _, ferr = s.Append(batch, undo, func(err error) { committed <- err }); ferr != nil {
			return
		}
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		var zero R
		return zero, err
	}
	if err := <-committed; err != nil {
		var zero R
		return zero, err
	}
	return resp, nil
}
