package replica

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
)

// never is the lastCaughtUpTime of a replica that has never been caught up.
const never = math.MinInt64 / 4

// follower is the leader's view of one remote replica (Replica.scala's
// ReplicaState, docs/kafka-replication.md §1.2). It changes only when that
// replica fetches.
type follower struct {
	id                 int32
	leo                int64 // flushed offset its last fetch reported (FetchRequest.Unflushed); -1 = unknown (docs/kafka-replication.md §1.4 new leaders)
	logStart           int64 // from its fetches; -1 unknown
	lastFetchTime      int64
	lastCaughtUpTime   int64
	lastFetchLeaderLEO int64
	brokerEpoch        int64 // from its fetches; -1 unknown
	metaBrokerEpoch    int64 // from metadata; -1 unknown
	ineligible         bool  // fenced or shutting down (KIP-841)
	inELR              bool  // an eligible leader replica (KIP-966)
	inISR              bool  // in the committed ISR
	inPending          bool  // in the in-flight proposal's ISR
}

type pendingAck struct {
	id         uint64
	required   int64 // HW needed: lastOffset+1
	base, last int64
	deadline   int64
	dup        bool
}

// Replica is the replication state machine of one partition on one broker.
// It is not safe for concurrent use: one goroutine (or simulator) owns it,
// feeds it events and executes its Ready.
type Replica struct {
	cfg   Config
	minIS int // effective min ISR, recomputed with the replica set
	now   int64

	// Mirror of the local log, including batches handed out in Ready but not
	// yet written by the driver.
	logStart, leo, flushed, hw int64
	// storageFailed: the log went offline (StorageFailed).
	storageFailed bool
	// deletes are the DeleteRecords waiting for the low watermark
	// (deleterecords.go).
	deletes   []pendingDelete
	epochs    *epoch.Cache
	producers *producer.State
	// completed holds the transactions whose marker is at or above the HW,
	// in marker order: still unstable (LastStable).
	completed []producer.Completed
	// guards are the pending transaction verifications by producer id
	// (BeginVerification); nextGuard numbers them.
	guards    map[int64]uint64
	nextGuard uint64
	logGen    uint64

	role           Role
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32

	// Leader only.
	epochStart int64
	followers  []follower
	isr        []int32 // committed ISR
	pending    *AlterPartitionRequest
	// inflight is the Seq of the proposal with the controller (0: none);
	// sendPending says pending still wants sending, not before retryAt.
	inflight    uint64
	sendPending bool
	retryAt     int64
	seq         uint64
	acks        []pendingAck // ordered by required
	localAcks   []pendingAck // acks=1 waiting for the flush, by required
	lastShrink  int64

	lastProducerExpiry int64 // Tick time of the last expiry pass

	// Follower only: the leader's TombstoneBound from its last answer.
	leaderTombstoneBound int64
	// Follower only: the last answer to the current fetch brought records,
	// so the leader may hold more and the next fetch need not wait for
	// the flush (FetchRequest).
	moreAtLeader bool

	rd            Ready
	epochsChanged bool
}

// New returns a replica with no role; it acts once ApplyMetadata names a
// leader. The state must be the recovered, durable log. Epoch-cache entries
// at or beyond st.LEO are dropped; if any were, the first Ready carries the
// corrected cache for the driver to persist.
func New(cfg Config, st LogState) *Replica {
	if cfg.MinISR <= 0 {
		cfg.MinISR = 1
	}
	if cfg.LagTimeMaxMs <= 0 {
		cfg.LagTimeMaxMs = 30000
	}
	if cfg.ProducerIDExpirationMs <= 0 {
		cfg.ProducerIDExpirationMs = 86400000
	}
	if cfg.ProducerIDExpirationCheckMs <= 0 {
		cfg.ProducerIDExpirationCheckMs = 600000
	}
	if st.Epochs == nil {
		st.Epochs = &epoch.Cache{}
	}
	if st.Producers == nil {
		st.Producers = producer.NewState()
	}
	r := &Replica{
		cfg:         cfg,
		logStart:    st.LogStart,
		leo:         st.LEO,
		flushed:     st.LEO,
		hw:          min(max(st.HW, st.LogStart), st.LEO),
		epochs:      st.Epochs,
		producers:   st.Producers,
		leader:      -1,
		leaderEpoch: -1,
		minIS:       cfg.MinISR,
		lastShrink:  never,
	}
	// Log recovery: epoch entries at or beyond the LEO have no data (a
	// leader's (epoch, LEO) entry, or batches lost in a crash). Drop them as
	// Kafka's recovery does, and report it in the first Ready: a stale entry
	// left in the checkpoint would later claim data of another epoch (the
	// simulator found this).
	if r.epochs.TruncateFromEnd(r.leo) {
		r.epochsChanged = true
	}
	for _, c := range st.Completed {
		if c.LastOffset >= r.hw && c.LastOffset < r.leo {
			r.completed = append(r.completed, c)
		}
	}
	r.rd.HW = r.hw
	return r
}

// Tick advances the state machine's clock to nowMs (monotonic; earlier values
// are ignored). On a leader it expires acks=all requests past their deadline
// and, every LagTimeMaxMs/2, shrinks the ISR (docs/kafka-replication.md §2.2).
func (r *Replica) Tick(nowMs int64) {
	if nowMs > r.now {
		r.now = nowMs
	}
	defer r.checkDeletes()
	if r.now-r.lastProducerExpiry >= r.cfg.ProducerIDExpirationCheckMs {
		r.lastProducerExpiry = r.now
		r.producers.ExpireBefore(r.now - r.cfg.ProducerIDExpirationMs)
	}
	if r.role != RoleLeader {
		return
	}
	r.maybeSendProposal()
	r.expireAcks()
	if r.now-r.lastShrink >= r.cfg.LagTimeMaxMs/2 {
		r.lastShrink = r.now
		r.maybeShrinkISR()
	}
}

// Flushed reports that the log is durable up to offset. logGen is the
// Ready.LogGen current when the flush started; a flush that raced a
// truncation is ignored (the driver simply flushes again). Under the
// durability rule (docs/architecture.md) only flushed data counts toward
// the HW, the leader's included.
func (r *Replica) Flushed(offset int64, logGen uint64) {
	if logGen != r.logGen || r.storageFailed {
		return
	}
	offset = min(offset, r.leo)
	if offset <= r.flushed {
		return
	}
	r.flushed = offset
	r.completeLocalAcks()
	if r.role == RoleLeader {
		r.maybeIncrementHW()
	}
}

// StorageFailed tells the machine its log can no longer be written or
// read (an I/O error took the log directory offline; Kafka's
// LogDirFailureChannel): every produce waiting for an acknowledgement
// fails with KAFKA_STORAGE_ERROR, and from now on so do produce requests
// and fetches, and nothing more counts as flushed. The broker halts after
// it (Broker.logDirFailed); a restart recovers the log from disk.
func (r *Replica) StorageFailed() {
	if r.storageFailed {
		return
	}
	r.storageFailed = true
	r.failAcks(ErrKafkaStorageError)
	r.checkDeletes()
}

// HasReady reports whether Ready has work.
func (r *Replica) HasReady() bool { return r.epochsChanged || !r.rd.IsEmpty() }

// Ready returns the pending work. It stays valid until Advance.
func (r *Replica) Ready() Ready {
	if r.epochsChanged {
		r.rd.Epochs = r.epochs.Entries()
		r.epochsChanged = false
	}
	r.rd.LogGen = r.logGen
	return r.rd
}

// Advance acknowledges that the last Ready was executed.
func (r *Replica) Advance() {
	clear(r.rd.Append) // drop payload references
	clear(r.rd.Completed)
	r.rd = Ready{Append: r.rd.Append[:0], Completed: r.rd.Completed[:0], Deleted: r.rd.Deleted[:0], HW: r.hw, LogGen: r.logGen}
}

// ApplyMetadata applies the controller's partition state (makeLeader /
// makeFollower, docs/kafka-replication.md §4.4). Stale states (older leader
// epoch, or same leader epoch and older partition epoch) are ignored.
func (r *Replica) ApplyMetadata(ps PartitionState) {
	defer r.checkDeletes() // leadership lost, or followers fenced
	if ps.LeaderEpoch < r.leaderEpoch ||
		(ps.LeaderEpoch == r.leaderEpoch && ps.PartitionEpoch < r.partitionEpoch) {
		return
	}
	newEpoch := ps.LeaderEpoch != r.leaderEpoch
	if !newEpoch && ps.PartitionEpoch == r.partitionEpoch {
		// The state we already hold (e.g. a re-sent or delayed copy): only
		// broker registrations may have changed. The ISR and any in-flight
		// proposal stay as they are; clearing the proposal here would drop
		// an expansion the controller may already have committed.
		r.updateEligibility(ps)
		return
	}
	r.replicas = append(r.replicas[:0], ps.Replicas...)
	r.minIS = min(r.cfg.MinISR, max(len(ps.Replicas), 1))
	r.partitionEpoch = ps.PartitionEpoch
	r.leaderEpoch = ps.LeaderEpoch
	r.leader = ps.Leader
	if ps.Leader == r.cfg.ID {
		r.makeLeader(ps, newEpoch || r.role != RoleLeader)
		return
	}
	if r.role == RoleLeader || newEpoch {
		r.failAcks(ErrNotLeaderOrFollower)
	}
	r.role = RoleFollower
	if newEpoch {
		r.leaderTombstoneBound = 0 // until the new leader says
		r.moreAtLeader = false
	}
	r.followers = r.followers[:0]
	r.isr = r.isr[:0] // followers do not know the ISR (docs/kafka-replication.md §1.2)
	r.pending = nil
	// A demoted leader may hold an epoch entry with no data (its (epoch, LEO)
	// from makeLeader); drop it so the next fetch carries the epoch of the last
	// batch actually in the log (docs/kafka-replication.md §3.3
	// truncateFromEnd).
	if r.epochs.TruncateFromEnd(r.leo) {
		r.epochsChanged = true
	}
}

func (r *Replica) makeLeader(ps PartitionState, fresh bool) {
	r.isr = append(r.isr[:0], ps.ISR...)
	r.pending = nil
	if fresh {
		r.failAcks(ErrNotLeaderOrFollower)
		r.role = RoleLeader
		// docs/kafka-replication.md §3.2 KAFKA-7415: assign (epoch, LEO) at
		// once, before any data.
		r.epochStart = r.leo
		if r.epochs.Assign(ps.LeaderEpoch, r.leo) {
			r.epochsChanged = true
		}
		r.lastShrink = r.now
	}
	// Rebuild the follower table; on a new leader epoch every follower's LEO is
	// unknown, so the HW is held until each ISR member fetches
	// (docs/kafka-replication.md §1.4).
	old := r.followers
	r.followers = make([]follower, 0, len(ps.Replicas))
	for i, id := range ps.Replicas {
		if id == r.cfg.ID {
			continue
		}
		f := follower{id: id, leo: -1, logStart: -1, brokerEpoch: -1, metaBrokerEpoch: -1, lastCaughtUpTime: never, lastFetchTime: never}
		if !fresh {
			for _, o := range old {
				if o.id == id {
					f = o
				}
			}
		} else if slices.Contains(ps.ISR, id) {
			f.lastCaughtUpTime = r.now // resetReplicaState (docs/kafka-replication.md §2.1)
		}
		if i < len(ps.BrokerEpochs) {
			f.metaBrokerEpoch = ps.BrokerEpochs[i]
		}
		f.ineligible = slices.Contains(ps.Ineligible, id)
		f.inELR = slices.Contains(ps.ELR, id)
		r.followers = append(r.followers, f)
	}
	r.refreshMembership()
	r.maybeIncrementHW()
}

// updateEligibility refreshes the followers' broker epochs and fencing.
func (r *Replica) updateEligibility(ps PartitionState) {
	for i := range r.followers {
		f := &r.followers[i]
		if j := slices.Index(ps.Replicas, f.id); j >= 0 && j < len(ps.BrokerEpochs) {
			f.metaBrokerEpoch = ps.BrokerEpochs[j]
		}
		f.ineligible = slices.Contains(ps.Ineligible, f.id)
		f.inELR = slices.Contains(ps.ELR, f.id)
	}
	if r.role == RoleLeader {
		r.maybeIncrementHW()
	}
}

// Accessors.

// Role returns the current role.
func (r *Replica) Role() Role { return r.role }

// Leader returns the leader's broker id, or -1.
func (r *Replica) Leader() int32 { return r.leader }

// LeaderEpoch returns the current leader epoch (-1 before any metadata).
func (r *Replica) LeaderEpoch() int32 { return r.leaderEpoch }

// PartitionEpoch returns the partition epoch last applied.
func (r *Replica) PartitionEpoch() int32 { return r.partitionEpoch }

// HW returns the high watermark.
func (r *Replica) HW() int64 { return r.hw }

// LEO returns the log end offset (including batches not yet written by the
// driver).
func (r *Replica) LEO() int64 { return r.leo }

// FlushedOffset returns the offset up to which the log is known durable.
func (r *Replica) FlushedOffset() int64 { return r.flushed }

// LogStart returns the log start offset.
func (r *Replica) LogStart() int64 { return r.logStart }

// LogGen returns the current truncation generation (see Ready.LogGen).
func (r *Replica) LogGen() uint64 { return r.logGen }

// EpochStart returns the leader-epoch start offset (leaders only).
func (r *Replica) EpochStart() int64 { return r.epochStart }

// Epochs returns the leader-epoch cache. Callers must not modify it.
func (r *Replica) Epochs() *epoch.Cache { return r.epochs }

// Producers returns the idempotent-producer state. Callers must not modify it.
func (r *Replica) Producers() *producer.State { return r.producers }

// ISR returns a copy of the committed ISR (leaders only; followers do not
// know the ISR).
func (r *Replica) ISR() []int32 { return slices.Clone(r.isr) }

// LeadsFollowers reports whether this replica leads a partition with other
// replicas (whose lag Tick checks).
func (r *Replica) LeadsFollowers() bool { return r.role == RoleLeader && len(r.replicas) > 1 }

// MaximalISR returns the committed ISR plus any in-flight expansion
// (docs/kafka-replication.md §1.4 KIP-497), sorted.
func (r *Replica) MaximalISR() []int32 {
	if r.role != RoleLeader {
		return nil
	}
	out := []int32{r.cfg.ID}
	for i := range r.followers {
		if r.followers[i].inISR || r.followers[i].inPending {
			out = append(out, r.followers[i].id)
		}
	}
	slices.Sort(out)
	return out
}

// PendingISR returns the in-flight proposal, or nil.
func (r *Replica) PendingISR() *AlterPartitionRequest { return r.pending }

// FollowerLEO returns the leader's record of a follower's LEO (-1 unknown)
// and whether id is a follower of this leader.
func (r *Replica) FollowerLEO(id int32) (int64, bool) {
	if f := r.follower(id); f != nil {
		return f.leo, true
	}
	return -1, false
}

// FollowerCaughtUp returns the leader's lastCaughtUpTime (ms) of a follower
// (docs/kafka-replication.md §2.1) and whether id is a follower of this leader.
func (r *Replica) FollowerCaughtUp(id int32) (int64, bool) {
	if f := r.follower(id); f != nil {
		return f.lastCaughtUpTime, true
	}
	return -1, false
}

// String summarises the replica for traces.
func (r *Replica) String() string {
	s := fmt.Sprintf("%s@%d %s e%d pe%d leo=%d flushed=%d hw=%d start=%d epochs=%s",
		r.cfg.Partition, r.cfg.ID, r.role, r.leaderEpoch, r.partitionEpoch,
		r.leo, r.flushed, r.hw, r.logStart, r.epochs)
	if r.role == RoleLeader {
		s += fmt.Sprintf(" isr=%v maximal=%v", r.isr, r.MaximalISR())
	}
	return s
}

// Log mutation helpers, shared by both roles.

// appendBatch adds b (offsets already assigned) to the mirror and the Ready.
func (r *Replica) appendBatch(b *Batch) {
	if r.epochs.Assign(b.Epoch, b.BaseOffset) {
		r.epochsChanged = true
	}
	var abort *AbortIndex
	switch {
	case b.Control && b.ProducerID >= 0:
		delete(r.guards, b.ProducerID) // a verification before it is stale
		if c, ok := r.producers.EndTxn(b.ProducerID, b.ProducerEpoch, b.CoordinatorEpoch, b.BaseOffset, b.MaxTimestamp, b.Aborted); ok {
			// Unstable until the HW passes its marker (Kafka's
			// unreplicatedTxns): a lost marker reopens it.
			r.completed = append(r.completed, c)
			if c.Aborted {
				abort = &AbortIndex{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset, LastOffset: c.LastOffset, LastStable: r.producers.StableAfter(c)}
			}
		}
	case b.ProducerID >= 0:
		r.producers.Update(b.ProducerID, b.ProducerEpoch, producer.Batch{
			FirstSeq: b.BaseSeq, LastSeq: b.LastSeq(),
			FirstOffset: b.BaseOffset, LastOffset: b.LastOffset(),
			MaxTime: b.MaxTimestamp,
		})
		if b.Transactional {
			r.producers.BeginTxn(b.ProducerID, b.BaseOffset)
			delete(r.guards, b.ProducerID)
		}
	}
	r.leo = b.LastOffset() + 1
	r.rd.Append = append(r.rd.Append, *b)
	r.rd.Append[len(r.rd.Append)-1].Abort = abort
}

// truncateTo cuts the log to offset (truncateTo, docs/kafka-replication.md
// §3.4): epoch cache, producer state and HW follow. Unwritten appends at or
// above offset are dropped from the Ready instead of being written and
// truncated.
func (r *Replica) truncateTo(offset int64) {
	if r.epochs.TruncateFromEnd(offset) { // even when no data goes (docs/kafka-replication.md §3.3)
		r.epochsChanged = true
	}
	if offset >= r.leo {
		return
	}
	offset = max(offset, r.logStart)
	n := 0
	for _, b := range r.rd.Append {
		if b.BaseOffset < offset {
			r.rd.Append[n] = b
			n++
		}
	}
	clear(r.rd.Append[n:])
	r.rd.Append = r.rd.Append[:n]
	if r.rd.Truncate == nil || r.rd.Truncate.Offset > offset {
		if r.rd.Truncate != nil && r.rd.Truncate.Fully {
			// Still a full truncation; nothing below its start exists.
			offset = max(offset, r.rd.Truncate.Offset)
		}
		r.rd.Truncate = &Truncation{Offset: offset, Fully: r.rd.Truncate != nil && r.rd.Truncate.Fully}
	}
	r.leo = offset
	r.flushed = min(r.flushed, offset)
	r.moreAtLeader = false
	r.failLocalAcks(ErrNotLeaderOrFollower, offset)
	r.producers.TruncateFrom(offset) // docs/kafka-replication.md §7: roll producer state back
	// A transaction whose marker is cut is open again.
	n = 0
	for _, c := range r.completed {
		switch {
		case c.LastOffset < offset:
			r.completed[n] = c
			n++
		case c.FirstOffset < offset:
			r.producers.Reopen(c.ProducerID, c.FirstOffset)
		}
	}
	r.completed = r.completed[:n]
	r.logGen++
	if r.hw > offset {
		r.setHW(offset)
	}
}

// truncateFullyAndStartAt empties the log and restarts it at offset
// (docs/kafka-replication.md §3.5).
func (r *Replica) truncateFullyAndStartAt(offset int64) {
	clear(r.rd.Append)
	r.rd.Append = r.rd.Append[:0]
	r.rd.Truncate = &Truncation{Offset: offset, Fully: true}
	r.epochs = &epoch.Cache{}
	r.epochsChanged = true
	r.producers = producer.NewState()
	r.completed = r.completed[:0]
	r.leo, r.flushed, r.logStart = offset, offset, offset
	r.logGen++
	r.rd.LogStart, r.rd.LogStartSet = offset, true
	r.setHW(offset)
}

func (r *Replica) setHW(hw int64) {
	r.hw = hw
	r.rd.HW, r.rd.HWChanged = hw, true
	n := 0
	for _, c := range r.completed {
		if c.LastOffset >= hw {
			r.completed[n] = c
			n++
		}
	}
	r.completed = r.completed[:n]
}

// LastStable returns the last stable offset (Kafka's
// UnifiedLog.lastStableOffset): the first offset of the oldest transaction
// that is open or whose marker is not yet below the HW, or the HW if there
// is none. read_committed consumers read below it (docs/transactions.md).
func (r *Replica) LastStable() int64 {
	lso := r.hw
	if first, ok := r.producers.FirstOpenTxn(); ok {
		lso = min(lso, first)
	}
	if !r.cfg.StableUnreplicatedTxns {
		for _, c := range r.completed {
			lso = min(lso, c.FirstOffset)
		}
	}
	return max(lso, r.logStart)
}

// AdvanceLogStart raises the log start offset on the leader (retention,
// DeleteRecords), never past the HW (docs/kafka-replication.md §1.1). Followers
// learn it from the LogStartOffset of fetch responses.
func (r *Replica) AdvanceLogStart(offset int64) {
	offset = min(offset, r.hw)
	if offset <= r.logStart {
		return
	}
	r.logStart = offset
	if r.epochs.TruncateFromStart(offset) {
		r.epochsChanged = true
	}
	r.rd.LogStart, r.rd.LogStartSet = offset, true
	r.checkDeletes()
}

// SetMinISR changes min.insync.replicas (a topic config change).
func (r *Replica) SetMinISR(n int) {
	if n < 1 {
		n = 1
	}
	r.cfg.MinISR = n
	if r.role != RoleNone {
		r.minIS = min(n, max(len(r.replicas), 1))
	}
	if r.role == RoleLeader {
		r.maybeIncrementHW()
	}
}

// maxGuards bounds the pending transaction verifications of a partition;
// beyond it they are all dropped (their batches then fail with
// INVALID_TXN_STATE and are retried by their producers).
const maxGuards = 10_000

// openTxn reports whether pid has a transaction open here.
func (r *Replica) openTxn(pid int64) bool {
	_, ok := r.producers.OpenTxn(pid)
	return ok
}

// BeginVerification records that the driver asks the transaction
// coordinator whether producer pid's transaction includes this partition
// (KIP-890 part 1) and returns the token its batch must carry
// (ProduceRequest.VerifyGuard). A marker for pid before the batch
// invalidates it: the transaction the coordinator vouched for ended.
func (r *Replica) BeginVerification(pid int64) uint64 {
	if r.guards == nil || len(r.guards) >= maxGuards {
		r.guards = map[int64]uint64{}
	}
	r.nextGuard++
	r.guards[pid] = r.nextGuard
	return r.nextGuard
}

// ResetProducers replaces the producer state with ps, the log's own
// after a truncation the driver carried out (storage rebuilds it exactly
// from a snapshot and the batches after it, where truncateTo can only roll
// back what it remembers: a transaction whose marker it saw before a
// restart is not among the completed ones it could reopen). ps must be
// the state at the machine's LEO, its Ready's appends included.
func (r *Replica) ResetProducers(ps *producer.State) {
	r.producers = ps
}

// LogTruncated reports that the driver's log ended below the truncation
// point the machine asked for: logs cut whole batches (Kafka's truncateTo
// cuts to the start of the batch holding the offset), and a diverged
// follower's batches need not end where the leader's epochs do. The
// machine's view of the log end follows the log's, so the next fetch asks
// for what is really missing.
func (r *Replica) LogTruncated(offset int64) {
	if offset < r.leo {
		r.truncateTo(offset)
	}
}

// TombstoneBound returns the offset below which every replica of the
// partition has copied the log, so that the log cleaner may remove a
// tombstone there without a lagging replica missing it and keeping the
// value it deleted (docs/compaction.md, "Tombstones and lagging
// replicas"). A leader computes it as the least of its HW and every
// assigned follower's LEO, in the ISR or not; it is 0 while a follower's
// position is unknown (a new leader epoch). A follower uses its leader's,
// capped by its own HW.
func (r *Replica) TombstoneBound() int64 {
	switch r.role {
	case RoleLeader:
		b := r.hw
		for i := range r.followers {
			if r.followers[i].leo < 0 {
				return 0
			}
			b = min(b, r.followers[i].leo)
		}
		return max(b, 0)
	case RoleFollower:
		return max(min(r.leaderTombstoneBound, r.hw), 0)
	}
	return 0
}
