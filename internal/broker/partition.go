package broker

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/storage"
)

// TP names a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

// Partition is this node's replica of one partition: the pure replica
// state machine (internal/replica) and the local log, with the driver that
// executes what the machine decides (append, truncate, flush, acknowledge,
// propose ISR changes). Machine calls are steps run by the partition's one
// owner (owner.go); offsets readers need often (HW, LEO, leader epoch) are
// mirrored in atomics.
type Partition struct {
	TP
	b   *Broker
	log *storage.Log
	// topicID is the id of the topic incarnation this replica belongs to
	// (KIP-516); a topic recreated under the same name has another.
	topicID metadata.UUID

	// qmu guards the owner's queue: owned is set while a goroutine owns
	// the partition; queue holds the steps handed in meanwhile, spare
	// the owner's other buffer.
	qmu   sync.Mutex
	owned bool
	queue []step
	spare []step

	// The owner's state: only steps read or write it.
	r       *replica.Replica
	nextID  uint64
	waiters map[uint64]chan replica.ProduceResult
	// deleteWaiters are the DeleteRecords the machine is completing.
	deleteWaiters map[uint64]chan DeleteResult
	closed        bool

	// busy is set while the machine has something time may complete or
	// expire (produce requests waiting, an ISR change in flight, or it
	// leads followers): such partitions tick every round, the others
	// every idleTickEvery rounds.
	busy atomic.Bool
	// tickSlot spreads idle partitions' ticks over the rounds.
	tickSlot uint8

	hw          atomic.Int64
	lso         atomic.Int64 // last stable offset (replica.Replica.LastStable)
	leo         atomic.Int64
	leaderEpoch atomic.Int32
	leader      atomic.Int32
	isLeader    atomic.Bool

	// notifyMu guards notify, closed (and replaced) whenever the high
	// watermark, log end, log start or role changes: it wakes long-poll
	// fetches, acks waiting on the HW and follower fetchers.
	notifyMu sync.Mutex
	notify   chan struct{}
	watchers map[*Watcher]struct{} // (notifyMu) long-poll fetches to wake

	// flushQueued is set while p waits in the broker's flush queue;
	// flushing is held during one of its fsync rounds (close waits on it).
	flushQueued atomic.Bool
	// fetcher is the follower fetcher replicating p, poked by wake.
	fetcher  atomic.Pointer[fetcher]
	flushing sync.Mutex
	done     chan struct{}
	// stepG is the id of the goroutine running a step of p, 0 between
	// steps; kept only with Options.CheckWriters (owner.go).
	stepG atomic.Int64
}

func newPartition(b *Broker, tp TP, log *storage.Log, minISR int) *Partition {
	p := &Partition{TP: tp, b: b, log: log, waiters: map[uint64]chan replica.ProduceResult{},
		deleteWaiters: map[uint64]chan DeleteResult{}, notify: make(chan struct{}), done: make(chan struct{})}
	// The machine becomes the one owner of the epoch cache and producer
	// state; the log persists what its Ready says (processReady).
	epochs, producers := log.HandOver(func() *producer.State {
		var ps *producer.State
		p.view(func() { ps = p.r.Producers().Clone() })
		return ps
	})
	// The transactions whose marker the HW has not passed stay unstable
	// across the restart (replica.LogState.Completed).
	hw := b.checkpointedHW(tp)
	completed, err := log.CompletedTxns(hw)
	if err != nil {
		b.log.Error("transactions above the high watermark", "topic", tp.Topic, "partition", tp.Partition, "err", err)
	}
	if b.knobs.KeepMachineProducers {
		completed = nil
	}
	p.r = replica.New(replica.Config{
		ID:           b.cfg.NodeID,
		BrokerEpoch:  b.ctrl.BrokerEpoch(),
		Partition:    tp.Topic + "-" + strconv.Itoa(int(tp.Partition)),
		MinISR:       minISR,
		LagTimeMaxMs: b.cfg.Int("replica.lag.time.max.ms", 30000),
		// producer.id.expiration.ms is also the log's (storage.Config),
		// which expires its snapshots' producers the same way.
		ProducerIDExpirationMs:      b.cfg.Int("producer.id.expiration.ms", 86400000),
		ProducerIDExpirationCheckMs: b.cfg.Int("producer.id.expiration.check.interval.ms", 600000),
		DropQueuedProposal:          b.knobs.DropQueuedISR,
		AcceptLateMarkers:           b.knobs.AcceptLateMarkers,
		AnswerDeleteRecordsEarly:    b.knobs.AnswerDeleteRecordsEarly,
		StableUnreplicatedTxns:      b.knobs.StableUnreplicatedTxns,
	}, replica.LogState{
		LogStart:  log.LogStartOffset(),
		LEO:       log.LogEndOffset(),
		HW:        hw,
		Epochs:    epoch.New(epochs),
		Producers: producers,
		Completed: completed,
	})
	// The owner is the log's one writer: the cleaner's swaps run as its
	// steps (storage.Writer).
	log.SetWriter(p.writer())
	// No tombstone goes until the machine knows where the replicas are.
	log.SetTombstoneBound(0)
	p.leader.Store(-1)
	p.do(func() {
		// The machine's clock starts at zero: set it before any metadata,
		// or a new leader would see its followers as not caught up since
		// 1970.
		p.r.Tick(b.now().UnixMilli())
		p.r.Flushed(log.FlushedOffset(), p.r.LogGen())
	})
	return p
}

// Log is the partition's local log.
func (p *Partition) Log() *storage.Log { return p.log }

// LeaderEpoch is the current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// Leader is the current leader's broker id (-1 if none).
func (p *Partition) Leader() int32 { return p.leader.Load() }

// IsLeader reports whether this node leads the partition.
func (p *Partition) IsLeader() bool { return p.isLeader.Load() }

// EpochStart is the log end offset at which this leader's epoch began.
func (p *Partition) EpochStart() int64 {
	var v int64
	p.view(func() { v = p.r.EpochStart() })
	return v
}

// HighWatermark is the first offset not yet committed: consumers read below it.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LastStableOffset returns the last published last stable offset
// (replica.Replica.LastStable): read_committed consumers read below it.
func (p *Partition) LastStableOffset() int64 { return p.lso.Load() }

// ProducerInfo is one producer's state in a partition, as
// DescribeProducers reports it (KIP-664).
type ProducerInfo struct {
	ProducerID       int64
	Epoch            int16
	LastSequence     int32 // -1 if no batch is retained
	LastTimestamp    int64 // ms
	CoordinatorEpoch int32 // of its last marker, -1 if none
	TxnStartOffset   int64 // first offset of its ongoing transaction, -1 if none
}

// MaxDescribedProducers bounds ActiveProducers' answer.
const MaxDescribedProducers = 10_000

// ActiveProducers returns the producers the partition's state machine
// tracks, sorted by producer id, at most MaxDescribedProducers.
func (p *Partition) ActiveProducers() []ProducerInfo {
	var out []ProducerInfo
	p.view(func() { out = p.activeProducers() })
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	if len(out) > MaxDescribedProducers {
		out = out[:MaxDescribedProducers]
	}
	return out
}

func (p *Partition) activeProducers() []ProducerInfo {
	ps := p.r.Producers()
	var out []ProducerInfo
	ps.Each(func(e *producer.Entry) {
		pi := ProducerInfo{ProducerID: e.ProducerID, Epoch: e.Epoch, LastSequence: -1, LastTimestamp: e.LastTime,
			CoordinatorEpoch: e.CoordinatorEpoch, TxnStartOffset: -1}
		if n := len(e.Batches); n > 0 {
			pi.LastSequence = e.Batches[n-1].LastSeq
		}
		if first, ok := ps.OpenTxn(e.ProducerID); ok {
			pi.TxnStartOffset = first
		}
		out = append(out, pi)
	})
	return out
}

// OpenTransactions returns the partition's ongoing transactions: producer
// id to the offset of its first batch in the transaction.
func (p *Partition) OpenTransactions() map[int64]int64 {
	out := map[int64]int64{}
	p.view(func() { p.r.Producers().EachOpenTxn(func(pid, first int64) { out[pid] = first }) })
	return out
}

// LogStartOffset is the first readable offset.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the offset the next append receives.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// Changed returns a channel closed at the next change of the high
// watermark, log end, log start or role.
func (p *Partition) Changed() <-chan struct{} {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	return p.notify
}

func (p *Partition) wake() {
	p.notifyMu.Lock()
	close(p.notify)
	p.notify = make(chan struct{})
	p.notifyWatchers()
	p.notifyMu.Unlock()
	if f := p.fetcher.Load(); f != nil {
		f.poke()
	}
}

// Status is a consistent view of the partition for the status page.
type Status struct {
	Role         string
	Leader       int32
	LeaderEpoch  int32
	HW, LEO      int64
	LogStart     int64
	ISR, Maximal []int32
	FollowerLEO  map[int32]int64
	// FollowerCaughtUp is each follower's lastCaughtUpTime (Unix ms).
	FollowerCaughtUp map[int32]int64
	FlushedOffset    int64
	PartitionEpoch   int32
	// Compacted is true for a cleanup.policy containing compact; then
	// DirtyRatio is the share of the log's cleanable bytes not cleaned
	// yet (storage.Log.Cleanable).
	Compacted  bool    `json:",omitempty"`
	DirtyRatio float64 `json:",omitempty"`
	// LSO is the last stable offset and OpenTxns the number of ongoing
	// transactions with records in the partition (docs/transactions.md).
	LSO      int64
	OpenTxns int
	// ProposalWaiting is set while the leader has an ISR change to
	// propose that is not with the controller (waiting for a retry's
	// back-off, or for the one in flight to be answered).
	ProposalWaiting bool `json:",omitempty"`
}

// Status returns the replica's state as the state machine sees it.
func (p *Partition) Status(replicas []int32) Status {
	var st Status
	p.view(func() { st = p.status(replicas) })
	return st
}

func (p *Partition) status(replicas []int32) Status {
	st := Status{Role: p.r.Role().String(), Leader: p.r.Leader(), LeaderEpoch: p.r.LeaderEpoch(), HW: p.r.HW(), LEO: p.r.LEO(),
		LogStart: p.r.LogStart(), ISR: p.r.ISR(), Maximal: p.r.MaximalISR(), FlushedOffset: p.r.FlushedOffset(),
		PartitionEpoch: p.r.PartitionEpoch(), FollowerLEO: map[int32]int64{}, FollowerCaughtUp: map[int32]int64{},
		Compacted: p.log.Config().Compact, LSO: p.r.LastStable(), OpenTxns: p.r.Producers().OpenTxns(),
		ProposalWaiting: p.r.PendingISR() != nil && p.r.InflightISR() == 0}
	if st.Compacted {
		st.DirtyRatio = p.log.Cleanable(p.b.now(), st.HW).DirtyRatio
	}
	for _, id := range replicas {
		if leo, ok := p.r.FollowerLEO(id); ok {
			st.FollowerLEO[id] = leo
		}
		if t, ok := p.r.FollowerCaughtUp(id); ok {
			st.FollowerCaughtUp[id] = t
		}
	}
	return st
}

// applyState applies the controller's view of the partition.
func (p *Partition) applyState(ps replica.PartitionState, minISR int) {
	p.do(func() {
		if p.closed {
			return
		}
		p.r.Tick(p.b.now().UnixMilli())
		p.r.SetMinISR(minISR)
		p.r.ApplyMetadata(ps)
	})
}

// tick advances the machine's clock.
func (p *Partition) tick(nowMs int64) {
	p.post(func() {
		if !p.closed {
			p.r.Tick(nowMs)
		}
	})
}

// processReady executes the machine's Ready in order (replica.Ready's
// contract): truncate, persist epochs, append (with the aborted-transaction
// index entries the machine decided; a segment roll snapshots the log's
// producer state at the new base), persist the log start, publish the HW,
// complete produce requests, propose ISR changes. Run by the owner after
// each step (owner.go).
func (p *Partition) processReady() {
	for p.r.HasReady() {
		rd := p.r.Ready()
		resync := int64(-1)
		if t := rd.Truncate; t != nil {
			var err error
			switch {
			case t.Fully && t.Tiered:
				err = p.log.TruncateFullyAndStartTiered(t.LogStart, t.Offset)
				if err == nil {
					// The producer state from the remote snapshot is the
					// log's from now on (Kafka writes the snapshot file
					// at the new log end).
					err = p.snapshotProducers()
				}
			case t.Fully:
				err = p.log.TruncateFullyAndStartAt(t.Offset)
			default:
				err = p.log.TruncateTo(t.Offset)
			}
			if err != nil && !p.ioFailed("truncate", err) {
				p.b.log.Error("truncate", "topic", p.Topic, "partition", p.Partition, "offset", t.Offset, "err", err)
			}
			if leo := p.log.LogEndOffset(); leo < t.Offset {
				// The log cut a whole batch: the machine follows it once
				// this Ready is done; its appends (none in practice)
				// would land at the wrong offsets, so they are dropped
				// and fetched again.
				resync = leo
			}
		}
		if rd.Epochs != nil {
			// Before the batches, as Kafka assigns an epoch's start before
			// appending: a checkpoint ahead of the log is cut back to the
			// log end by recovery.
			if err := p.log.SetEpochs(rd.Epochs); err != nil && !p.ioFailed("leader-epoch checkpoint", err) {
				p.b.log.Error("epoch checkpoint", "topic", p.Topic, "partition", p.Partition, "err", err)
			}
		}
		for i := range rd.Append {
			if resync >= 0 {
				break
			}
			bt := &rd.Append[i]
			batch.SetBaseOffset(bt.Data, bt.BaseOffset)
			batch.SetLeaderEpoch(bt.Data, bt.Epoch)
			var err error
			if a := bt.Abort; a != nil {
				err = p.log.Append(bt.Data, storage.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, LastStable: a.LastStable})
			} else {
				err = p.log.Append(bt.Data)
			}
			if err != nil && !p.ioFailed("append", err) {
				p.b.log.Error("append", "topic", p.Topic, "partition", p.Partition, "offset", bt.BaseOffset, "err", err)
			}
		}
		if rd.LogStartSet && rd.LogStart > p.log.LogStartOffset() {
			if err := p.log.AdvanceLogStart(rd.LogStart); err != nil && !errors.Is(err, storage.ErrOffsetOutOfRange) && !p.ioFailed("advance log start", err) {
				p.b.log.Warn("advance log start", "topic", p.Topic, "partition", p.Partition, "err", err)
			}
		}
		if len(rd.Completed) > 0 {
			// An acknowledged write is below the HW any reader sees
			// next (Kafka completes delayed produces after the HW
			// moved): publish before answering.
			p.publish()
		}
		p.answerDeletes(rd.Deleted)
		failed := p.b.dirFailed.Load()
		for _, c := range rd.Completed {
			if failed && c.Error == 0 {
				// The data directory failed (possibly in this very Ready,
				// under the append above): nothing more is acknowledged.
				c = replica.ProduceResult{ID: c.ID, Acks: c.Acks, Error: kerr.KafkaStorageError.Code, BaseOffset: -1, LastOffset: -1}
			}
			if ch, ok := p.waiters[c.ID]; ok {
				delete(p.waiters, c.ID)
				ch <- c
			}
		}
		if prop := rd.ISRProposal; prop != nil {
			// The machine keeps at most one with the controller and
			// retries after a pause itself.
			req := *prop
			req.NewISR = append([]int32(nil), prop.NewISR...)
			req.BrokerEpochs = append([]int64(nil), prop.BrokerEpochs...)
			p.b.sendAlter(p, req)
		}
		if rd.Truncate != nil && resync < 0 && p.log.LogEndOffset() == p.r.LEO() && !p.b.knobs.KeepMachineProducers {
			// The producer state rebuilt from the disk is exact after a
			// truncation (replica.Replica.ResetProducers).
			if ps, err := p.log.ProducerState(); err == nil {
				p.r.ResetProducers(ps)
			} else if !p.ioFailed("producer state", err) {
				p.b.log.Error("producer state after truncation", "topic", p.Topic, "partition", p.Partition, "err", err)
			}
		}
		p.r.Advance()
		if resync >= 0 {
			p.r.LogTruncated(resync)
		}
	}
	p.publish()
	if p.r.LEO() > p.r.FlushedOffset() {
		p.b.flusher.kick(p)
	}
	p.busy.Store(len(p.waiters) > 0 || p.r.PendingDeletes() > 0 || p.r.InflightISR() != 0 || p.r.PendingISR() != nil || p.r.LeadsFollowers())
}

// snapshotProducers writes the machine's producer state as the log's
// snapshot at its end, once the log holds everything the machine applied
// (a clean close, a log rebuilt from a remote snapshot); segment rolls
// snapshot the log's own state. By the owner; a failed log refuses it.
func (p *Partition) snapshotProducers() error {
	if p.log.LogEndOffset() != p.r.LEO() {
		return nil
	}
	return p.log.WriteProducerSnapshot(p.r.Producers().Encode())
}

// publish copies the machine's HW, LEO, epoch, leader and role into the
// atomics lock-free readers use (ListOffsets, Metadata, the status page),
// waking waiters if anything moved (by the owner).
func (p *Partition) publish() {
	changed := false
	if hw := p.r.HW(); p.hw.Swap(hw) != hw {
		changed = true
	}
	if lso := p.r.LastStable(); p.lso.Swap(lso) != lso {
		changed = true
	}
	if leo := p.r.LEO(); p.leo.Swap(leo) != leo {
		changed = true
	}
	if e := p.r.LeaderEpoch(); p.leaderEpoch.Swap(e) != e {
		changed = true
	}
	if l := p.r.Leader(); p.leader.Swap(l) != l {
		changed = true
	}
	if isL := p.r.Role() == replica.RoleLeader; p.isLeader.Swap(isL) != isL {
		changed = true
	}
	p.log.SetTombstoneBound(p.r.TombstoneBound())
	if changed {
		p.wake()
	}
}

// alterPartition sends an ISR proposal to the controller and feeds the
// answer (or the failure to get one) back to the machine.
func (p *Partition) alterPartition(req replica.AlterPartitionRequest) {
	ctx, cancel := p.b.context(30 * time.Second)
	if ctx.Err() != nil {
		// The broker is closing: no call (a controller may apply the
		// answer to this broker, whose reconcile Close is holding off).
		cancel()
		return
	}
	resp, err := p.b.ctrl.AlterPartition(ctx, metadata.AlterPartitionRequest{
		Topic: p.Topic, Partition: p.Partition, BrokerID: p.b.cfg.NodeID, BrokerEpoch: p.b.ctrl.BrokerEpoch(),
		LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch, NewISR: req.NewISR, ISRBrokerEpochs: req.BrokerEpochs,
		// A leader elected uncleanly has nothing to recover: its log is the
		// partition's from now on, as Kafka brokers treat it (KIP-704).
		Recovered: true,
	})
	cancel()
	res := replica.AlterPartitionResult{Seq: req.Seq}
	if err != nil {
		res.Error = kerr.RequestTimedOut.Code
		var ke *kerr.Error
		if errors.As(err, &ke) {
			res.Error = ke.Code
		}
	} else {
		res.Error, res.LeaderEpoch, res.PartitionEpoch, res.ISR = resp.Error, resp.LeaderEpoch, resp.PartitionEpoch, resp.ISR
	}
	p.post(func() {
		if !p.closed {
			p.r.ISRChangeResult(res)
		}
	})
}

// Produce appends one validated client batch (leader only) and returns a
// channel that receives its result: for acks=1 once the leader's log is
// durable past it, for acks=all once the HW covers it (or an error); the
// replica machine decides both.
func (p *Partition) Produce(data []byte, h batch.Header, acks int16, deadline time.Time) <-chan replica.ProduceResult {
	return p.produce(data, h, acks, deadline, replica.OriginClient, 0, false)
}

// ProduceVerified is Produce for a transactional batch whose transaction
// was verified with its coordinator under guard (BeginVerification).
func (p *Partition) ProduceVerified(data []byte, h batch.Header, acks int16, deadline time.Time, guard uint64) <-chan replica.ProduceResult {
	return p.produce(data, h, acks, deadline, replica.OriginClient, guard, false)
}

// TxnOpen reports whether producer pid has a transaction open in the
// partition at producer epoch epoch: its batches of that epoch need no
// verification. (Under transaction version 2 the epoch goes up at every
// transaction: an open one at an older epoch is the previous transaction,
// its markers still on their way.)
func (p *Partition) TxnOpen(pid int64, epoch int16) bool {
	var open bool
	p.view(func() {
		ps := p.r.Producers()
		_, ok := ps.OpenTxn(pid)
		e := ps.Get(pid)
		open = ok && e != nil && e.Epoch == epoch
	})
	return open
}

// BeginVerification starts the verification of producer pid's
// transaction (replica.Replica.BeginVerification) and returns its guard.
func (p *Partition) BeginVerification(pid int64) uint64 {
	var guard uint64
	p.do(func() { guard = p.r.BeginVerification(pid) })
	return guard
}

func (p *Partition) produce(data []byte, h batch.Header, acks int16, deadline time.Time, origin replica.Origin, guard uint64, bumpedEpoch bool) <-chan replica.ProduceResult {
	ch := make(chan replica.ProduceResult, 1)
	b := machineBatch(data, h)
	b.BumpedEpoch = bumpedEpoch && b.Control
	if b.Control && b.ProducerID < 0 {
		ch <- replica.ProduceResult{Acks: acks, Error: kerr.CorruptMessage.Code, BaseOffset: -1, LastOffset: -1}
		return ch
	}
	var dl int64
	if !deadline.IsZero() {
		dl = deadline.UnixMilli()
	}
	p.post(func() {
		if p.closed {
			ch <- replica.ProduceResult{Error: kerr.NotLeaderForPartition.Code, BaseOffset: -1, LastOffset: -1}
			return
		}
		if p.b.dirFailed.Load() {
			ch <- replica.ProduceResult{Acks: acks, Error: kerr.KafkaStorageError.Code, BaseOffset: -1, LastOffset: -1}
			return
		}
		p.nextID++
		id := p.nextID
		if acks != 0 {
			p.waiters[id] = ch
		}
		p.r.Append(replica.ProduceRequest{ID: id, Acks: acks, DeadlineMs: dl, Batch: b, Origin: origin, VerifyGuard: guard})
		if acks == 0 {
			ch <- replica.ProduceResult{Acks: 0}
		}
	})
	return ch
}

// machineBatch is what the replica machine sees of batch data with header
// h: for a transaction marker, its type and coordinator epoch. A control
// batch that is not a transaction marker gets producer id -1 (the machine
// keeps no state for it).
func machineBatch(data []byte, h batch.Header) replica.Batch {
	b := replica.Batch{
		BaseOffset: h.BaseOffset, NumRecords: h.LastOffsetDelta + 1, Epoch: h.LeaderEpoch,
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSeq: h.BaseSequence, MaxTimestamp: h.MaxTimestamp,
		Data: data, Transactional: h.IsTransactional(), Control: h.IsControl(),
	}
	if b.Control {
		m, err := batch.ParseMarker(data)
		if err != nil {
			b.ProducerID = replica.NoProducer
			return b
		}
		b.Aborted, b.CoordinatorEpoch = !m.Commit, m.CoordinatorEpoch
	}
	return b
}

// WriteMarker appends a transaction marker (batch.EncodeMarker) as leader
// for the transaction coordinator and returns a channel that receives its
// result once the HW covers it (acks=all), as Kafka's
// handleWriteTxnMarkersRequest appends with required acks -1.
// bumpedEpoch says the marker ends a transaction version 2 transaction
// (replica.Batch.BumpedEpoch).
func (p *Partition) WriteMarker(data []byte, deadline time.Time, bumpedEpoch bool) <-chan replica.ProduceResult {
	h, err := batch.ParseHeader(data)
	if err != nil || !h.IsControl() {
		ch := make(chan replica.ProduceResult, 1)
		ch <- replica.ProduceResult{Error: kerr.CorruptMessage.Code, BaseOffset: -1, LastOffset: -1}
		return ch
	}
	return p.produce(data, h, replica.AcksAll, deadline, replica.OriginCoordinator, 0, bumpedEpoch)
}

// Append appends a batch as leader and returns its offsets at once,
// durable or not (replica.AcksAppended): the group coordinator waits for
// what it needs with Commit. A batch with a producer id is the
// coordinator's own (transactional offsets): its producer epoch is checked,
// its sequence numbers are not.
func (p *Partition) Append(data []byte, now time.Time) (storage.AppendInfo, error) {
	h, err := batch.ParseHeader(data)
	if err != nil {
		return storage.AppendInfo{}, kerr.CorruptMessage
	}
	res := <-p.produce(data, h, replica.AcksAppended, time.Time{}, replica.OriginCoordinator, 0, false)
	if res.Error != 0 {
		return storage.AppendInfo{}, kerr.ErrorForCode(res.Error)
	}
	return storage.AppendInfo{FirstOffset: res.BaseOffset, LastOffset: res.LastOffset, Duplicate: res.Duplicate}, nil
}

// Commit waits until every offset below end is committed (below the high
// watermark), failing if leadership is lost or after a minute.
func (p *Partition) Commit(end int64) error {
	deadline := p.b.clock.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		ch := p.Changed()
		if p.hw.Load() >= end {
			return nil
		}
		if !p.isLeader.Load() {
			return kerr.NotLeaderForPartition
		}
		select {
		case <-ch:
		case <-deadline.C():
			return kerr.RequestTimedOut
		case <-p.done:
			return kerr.NotLeaderForPartition
		}
	}
}

// Fetch serves one partition of a Fetch request on the leader: the
// machine checks epochs, divergence and range and (for a follower) records
// its position; the records in [From, To) are then located in the log, at
// most maxBytes (the first batch whole when first is set, KIP-74), as byte
// ranges of its files (copied, or sent with sendfile, by the caller). An
// offset below the local log start (tiered storage) is answered by
// tieredFetch (remote.go): a consumer's with storage.ErrOffsetTiered, for
// the caller to read the remote log.
func (p *Partition) Fetch(req replica.FetchRequest, maxBytes int, first bool) (replica.FetchResult, storage.Slice, error) {
	var res replica.FetchResult
	// A consumer's fetch changes nothing in the machine; a follower's
	// moves its position, and maybe the HW, the ISR and acks.
	step := p.do
	if req.ReplicaID < 0 {
		step = p.view
	}
	step(func() {
		switch {
		case p.closed:
			res = replica.FetchResult{Error: kerr.NotLeaderForPartition.Code}
		case p.b.dirFailed.Load():
			res = replica.FetchResult{Error: kerr.KafkaStorageError.Code}
		default:
			res = p.r.HandleFetch(req)
		}
	})
	if res.Error != 0 || res.Diverging != nil || res.From >= res.To || maxBytes <= 0 {
		return res, storage.Slice{}, nil
	}
	slice, err := p.log.Read(res.From, maxBytes, res.To)
	if err != nil {
		if errors.Is(err, storage.ErrOffsetOutOfRange) {
			res.Error = kerr.OffsetOutOfRange.Code
			return res, storage.Slice{}, nil
		}
		if errors.Is(err, storage.ErrOffsetTiered) {
			return p.tieredFetch(req, res)
		}
		return res, storage.Slice{}, err
	}
	if slice.Size > int64(maxBytes) && !first {
		return res, storage.Slice{}, nil
	}
	return res, slice, nil
}

// ReadReplicas returns the in-sync followers holding offset, on the
// leader (replica.Replica.ReadReplicas; KIP-392).
func (p *Partition) ReadReplicas(offset int64) []replica.ReadReplica {
	var out []replica.ReadReplica
	p.view(func() {
		if !p.closed {
			out = p.r.ReadReplicas(offset)
		}
	})
	return out
}

// followerFetchRequest returns the next fetch to send to the leader, if the
// machine wants one now.
func (p *Partition) followerFetchRequest() (req replica.FetchRequest, ok bool) {
	p.do(func() {
		if !p.closed {
			req, ok = p.r.FetchRequest()
		}
	})
	return req, ok
}

// awaitingFlush reports a follower whose next fetch waits for its flush.
func (p *Partition) awaitingFlush() bool {
	var v bool
	p.view(func() {
		v = !p.closed && p.r.Role() == replica.RoleFollower && p.r.Leader() >= 0 && p.r.FlushedOffset() < p.r.LEO()
	})
	return v
}

// handleFetchResponse feeds a leader's answer to the machine.
func (p *Partition) handleFetchResponse(resp replica.FetchResponse) {
	p.do(func() {
		if !p.closed {
			p.r.HandleFetchResponse(resp)
		}
	})
}

// nothingFetched tells the machine the leader's answer left p out.
func (p *Partition) nothingFetched(req replica.FetchRequest) {
	p.do(func() {
		if !p.closed {
			p.r.NothingFetched(req)
		}
	})
}

// AdvanceLogStart raises the log start offset on the leader to one its log
// has already reached (retention), which cannot pass the high watermark;
// DeleteRecords goes through Partition.DeleteRecords, which also waits for
// the followers.
func (p *Partition) AdvanceLogStart(offset int64) error {
	var err error
	p.do(func() {
		switch {
		case p.closed || !p.isLeader.Load():
			err = kerr.NotLeaderForPartition
		case offset > p.r.HW():
			err = kerr.OffsetOutOfRange
		default:
			p.r.AdvanceLogStart(offset)
		}
	})
	if err == nil {
		p.wake()
	}
	return err
}

// ioFailed reports whether err is an I/O failure that took the log offline
// (storage.ErrFailed); if so the machine learns it (an event: it fails
// every waiting produce and serves nothing more) and the broker halts
// (Broker.logDirFailed). Called by the owner in a step, or by a flush,
// retention or cleaner goroutine: the event is posted either way.
func (p *Partition) ioFailed(op string, err error) bool {
	if !errors.Is(err, storage.ErrFailed) {
		return false
	}
	p.post(func() { p.r.StorageFailed() })
	p.b.logDirFailed(&p.TP, op, err)
	return true
}

// close stops the partition: pending produce requests fail with
// NOT_LEADER_OR_FOLLOWER. With remove set the log is deleted.
func (p *Partition) close(remove bool) error {
	already := false
	p.do(func() {
		if already = p.closed; already {
			return
		}
		p.closed = true
		if !remove {
			// What a clean close leaves at the log end; a failed log
			// refuses it, and recovery replays instead.
			p.snapshotProducers()
		}
		for id, ch := range p.waiters {
			delete(p.waiters, id)
			ch <- replica.ProduceResult{ID: id, Error: kerr.NotLeaderForPartition.Code, BaseOffset: -1, LastOffset: -1}
		}
		for id, ch := range p.deleteWaiters {
			delete(p.deleteWaiters, id)
			ch <- DeleteResult{LowWatermark: -1, Err: kerr.NotLeaderForPartition}
		}
		p.isLeader.Store(false)
	})
	if already {
		return nil
	}
	close(p.done)
	p.flushing.Lock() // a running fsync round ends first
	p.flushing.Unlock()
	p.wake()
	if remove {
		return p.log.Delete()
	}
	return p.log.Close()
}

// inISR reports whether replica is in the partition's ISR as the replica
// machine knows it (the leader's own, or the metadata's on a follower).
func (p *Partition) inISR(replica int32) bool {
	var in bool
	p.view(func() { in = slices.Contains(p.r.ISR(), replica) })
	return in
}
