package replica

import (
	"errors"
	"slices"

	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
)

// Append handles a produce request on the leader (appendRecordsToLeader,
// docs/kafka-replication.md §1.3). The result, immediate or later, arrives in
// Ready.Completed.
func (r *Replica) Append(req ProduceRequest) {
	fail := func(code int16) {
		r.rd.Completed = append(r.rd.Completed, ProduceResult{ID: req.ID, Acks: req.Acks, Error: code, BaseOffset: -1, LastOffset: -1})
	}
	b := &req.Batch
	if r.storageFailed {
		fail(ErrKafkaStorageError)
		return
	}
	if r.role != RoleLeader {
		fail(ErrNotLeaderOrFollower)
		return
	}
	if b.NumRecords <= 0 {
		fail(ErrInvalidRequest)
		return
	}
	// docs/kafka-replication.md §2.5: acks=all is rejected before the append
	// when the committed ISR is below the effective min ISR.
	if req.Acks == AcksAll && len(r.isr) < r.minIS {
		fail(ErrNotEnoughReplicas)
		return
	}
	if b.Control {
		// A transaction marker (Kafka's appendEndTxnMarker checks).
		if req.Origin != OriginCoordinator || b.ProducerID < 0 {
			fail(ErrInvalidRequest)
			return
		}
		switch err := r.producers.CheckMarker(b.ProducerID, b.ProducerEpoch, b.CoordinatorEpoch); {
		case errors.Is(err, producer.ErrCoordinatorFenced):
			fail(ErrTransactionCoordinatorFenced)
			return
		case err != nil:
			fail(ErrInvalidProducerEpoch)
			return
		}
		if e := r.producers.Get(b.ProducerID); b.BumpedEpoch && !r.cfg.AcceptLateMarkers && e != nil && r.openTxn(b.ProducerID) && e.Epoch >= b.ProducerEpoch {
			// The open transaction began at this marker's epoch: it is
			// the next one; this marker ended an earlier one and came late.
			fail(ErrInvalidProducerEpoch)
			return
		}
	} else if b.Transactional && req.VerifyGuard != 0 && !r.openTxn(b.ProducerID) && r.guards[b.ProducerID] != req.VerifyGuard {
		// The transaction the coordinator vouched for ended meanwhile: a
		// late batch must not open a transaction no marker will end.
		fail(ErrInvalidTxnState)
		return
	} else if b.ProducerID >= 0 && req.Origin == OriginCoordinator {
		// The group coordinator's transactional offsets: no sequence.
		if e := r.producers.Get(b.ProducerID); e != nil && b.ProducerEpoch < e.Epoch {
			fail(ErrInvalidProducerEpoch)
			return
		}
	} else if b.ProducerID >= 0 {
		// docs/kafka-replication.md §7 idempotence: duplicates answer with the
		// original offsets.
		dup, err := r.producers.Check(b.ProducerID, b.ProducerEpoch, b.BaseSeq, b.LastSeq())
		switch {
		case errors.Is(err, producer.ErrInvalidProducerEpoch):
			fail(ErrInvalidProducerEpoch)
			return
		case err != nil:
			fail(ErrOutOfOrderSequence)
			return
		case dup != nil:
			r.ack(req, dup.FirstOffset, dup.LastOffset, true)
			return
		}
	}
	b.BaseOffset = r.leo
	b.Epoch = r.leaderEpoch
	r.appendBatch(b)
	r.ack(req, b.BaseOffset, b.LastOffset(), false)
	// The HW only moves once the append is flushed (the durability rule), unless the
	// flush offset was already ahead (never, for a leader); nothing to do.
}

// ack completes or parks an appended (or duplicate) produce request.
func (r *Replica) ack(req ProduceRequest, base, last int64, dup bool) {
	if req.Acks == AcksLeader && r.flushed <= last {
		// acks=1 answers once the leader's own log is durable there (the
		// durability rule): parked until Flushed covers it.
		r.localAcks = append(r.localAcks, pendingAck{id: req.ID, required: last + 1, base: base, last: last, deadline: req.DeadlineMs, dup: dup})
		return
	}
	if req.Acks != AcksAll {
		r.rd.Completed = append(r.rd.Completed, ProduceResult{ID: req.ID, Acks: req.Acks, BaseOffset: base, LastOffset: last, Duplicate: dup})
		return
	}
	p := pendingAck{id: req.ID, required: last + 1, base: base, last: last, deadline: req.DeadlineMs, dup: dup}
	if r.hw >= p.required {
		r.complete(p)
		return
	}
	i := len(r.acks)
	for i > 0 && r.acks[i-1].required > p.required {
		i--
	}
	r.acks = slices.Insert(r.acks, i, p)
}

// complete resolves a parked acks=all request whose offset the HW reached: NONE
// if the maximal ISR still meets min ISR, else NOT_ENOUGH_REPLICAS_AFTER_APPEND
// (checkEnoughReplicasReachOffset, docs/kafka-replication.md §2.5). With strict
// min ISR and completion at the moment the HW moves, the second case cannot
// arise here (the maximal ISR contains the committed one, which must meet min
// ISR for the HW to move); it is kept as Kafka's rule.
func (r *Replica) complete(p pendingAck) {
	res := ProduceResult{ID: p.id, Acks: AcksAll, BaseOffset: p.base, LastOffset: p.last, Duplicate: p.dup}
	if r.maximalSize() < r.minIS {
		res.Error = ErrNotEnoughReplicasAfterAppend
	}
	r.rd.Completed = append(r.rd.Completed, res)
}

func (r *Replica) completeAcks() {
	n := 0
	for n < len(r.acks) && r.acks[n].required <= r.hw {
		r.complete(r.acks[n])
		n++
	}
	if n > 0 {
		r.acks = append(r.acks[:0], r.acks[n:]...)
	}
}

func (r *Replica) failAcks(code int16) {
	for _, p := range r.acks {
		r.rd.Completed = append(r.rd.Completed, ProduceResult{ID: p.id, Acks: AcksAll, Error: code, BaseOffset: -1, LastOffset: -1})
	}
	r.acks = r.acks[:0]
	r.failLocalAcks(code, -1)
}

// completeLocalAcks answers the acks=1 requests the flushed offset now
// covers (they are parked in offset order).
func (r *Replica) completeLocalAcks() {
	n := 0
	for n < len(r.localAcks) && r.localAcks[n].required <= r.flushed {
		p := r.localAcks[n]
		r.rd.Completed = append(r.rd.Completed, ProduceResult{ID: p.id, Acks: AcksLeader, BaseOffset: p.base, LastOffset: p.last, Duplicate: p.dup})
		n++
	}
	if n > 0 {
		r.localAcks = append(r.localAcks[:0], r.localAcks[n:]...)
	}
}

// failLocalAcks fails the parked acks=1 requests that need offsets at or
// above from (-1: all of them): the log was cut below them, or the
// replica stopped leading, before they became durable.
func (r *Replica) failLocalAcks(code int16, from int64) {
	n := 0
	for _, p := range r.localAcks {
		if from < 0 || p.required > from {
			r.rd.Completed = append(r.rd.Completed, ProduceResult{ID: p.id, Acks: AcksLeader, Error: code, BaseOffset: -1, LastOffset: -1})
			continue
		}
		r.localAcks[n] = p
		n++
	}
	r.localAcks = r.localAcks[:n]
}

func (r *Replica) expireAcks() {
	n := 0
	for _, p := range r.acks {
		if p.deadline > 0 && r.now >= p.deadline {
			// Ambiguous: the batch may still commit (docs/kafka-replication.md
			// §2.5).
			r.rd.Completed = append(r.rd.Completed, ProduceResult{ID: p.id, Acks: AcksAll, Error: ErrRequestTimedOut, BaseOffset: -1, LastOffset: -1})
			continue
		}
		r.acks[n] = p
		n++
	}
	r.acks = r.acks[:n]
	n = 0
	for _, p := range r.localAcks {
		if p.deadline > 0 && r.now >= p.deadline {
			r.rd.Completed = append(r.rd.Completed, ProduceResult{ID: p.id, Acks: AcksLeader, Error: ErrRequestTimedOut, BaseOffset: -1, LastOffset: -1})
			continue
		}
		r.localAcks[n] = p
		n++
	}
	r.localAcks = r.localAcks[:n]
}

// HandleFetch answers a Fetch for this partition (Partition.fetchRecords,
// docs/kafka-replication.md §1.3). A follower's fetch offset is its
// acknowledgement: it updates the follower's LEO, caught-up time and maybe the
// ISR and HW. ReplicaID -1 is a consumer, which reads only up to the HW
// (docs/kafka-replication.md §1.5).
func (r *Replica) HandleFetch(req FetchRequest) FetchResult {
	defer r.checkDeletes() // a follower reported its log start
	res := FetchResult{HW: r.hw, LogStart: r.logStart, LEO: r.leo, From: req.FetchOffset, To: req.FetchOffset}
	if r.storageFailed {
		res.Error = ErrKafkaStorageError
		return res
	}
	// A follower serves a consumer that sent client metadata (KIP-392,
	// ReplicaManager's fetchOnlyFromLeader), up to its own HW.
	if r.role != RoleLeader && !(r.role == RoleFollower && req.ReplicaID < 0 && req.AnyReplica) {
		res.Error = ErrNotLeaderOrFollower
		return res
	}
	// docs/kafka-replication.md §3.6 KIP-320 fencing.
	if req.CurrentLeaderEpoch >= 0 {
		if req.CurrentLeaderEpoch < r.leaderEpoch {
			res.Error = ErrFencedLeaderEpoch
			return res
		}
		if req.CurrentLeaderEpoch > r.leaderEpoch {
			res.Error = ErrUnknownLeaderEpoch
			return res
		}
	}
	if req.ReplicaID < 0 {
		if req.FetchOffset < r.logStart || req.FetchOffset > r.leo {
			res.Error = ErrOffsetOutOfRange
			return res
		}
		res.LSO = r.LastStable()
		res.To = max(r.hw, req.FetchOffset)
		if req.ReadCommitted {
			res.To = max(res.LSO, req.FetchOffset)
		}
		return res
	}
	if r.role != RoleLeader {
		res.Error = ErrNotLeaderOrFollower
		return res
	}
	f := r.follower(req.ReplicaID)
	if f == nil {
		res.Error = ErrUnknownLeaderEpoch // not in the assignment (docs/kafka-replication.md §1.3)
		return res
	}
	// KIP-903: a fetch from an older incarnation is fenced.
	if req.BrokerEpoch >= 0 && f.metaBrokerEpoch >= 0 && req.BrokerEpoch < f.metaBrokerEpoch {
		res.Error = ErrNotLeaderOrFollower
		return res
	}
	// docs/kafka-replication.md §3.4 divergence check.
	if req.LastFetchedEpoch != epoch.Undefined {
		e, end := r.epochs.EndOffsetFor(req.LastFetchedEpoch, r.leo)
		if e == epoch.Undefined || end == epoch.Undefined || req.FetchOffset < r.logStart {
			res.Error = ErrOffsetOutOfRange
			return res
		}
		if e < req.LastFetchedEpoch || end < req.FetchOffset {
			res.Diverging = &DivergingEpoch{Epoch: e, EndOffset: end}
			return res
		}
	} else if req.FetchOffset < r.logStart || req.FetchOffset > r.leo {
		res.Error = ErrOffsetOutOfRange
		return res
	}
	res.To = r.leo
	r.updateFollower(f, req)
	res.TombstoneBound = r.TombstoneBound()
	return res
}

// ReadReplicas returns, on the leader, the followers a consumer reading
// from fetchOffset may be sent to (KIP-392, ReplicaManager.
// findPreferredReadReplica): members of the ISR whose log, as their last
// fetch reported it, holds fetchOffset. Only in-sync followers: a lagging
// one could keep the consumer behind indefinitely. Nil on a follower.
func (r *Replica) ReadReplicas(fetchOffset int64) []ReadReplica {
	if r.role != RoleLeader {
		return nil
	}
	var out []ReadReplica
	for _, f := range r.followers {
		if f.inISR && f.leo >= fetchOffset && f.logStart >= 0 && f.logStart <= fetchOffset {
			out = append(out, ReadReplica{ID: f.id, LEO: f.leo, SinceCaughtUp: r.now - f.lastCaughtUpTime})
		}
	}
	return out
}

// updateFollower records a follower's fetch (updateFollowerFetchState and
// Replica.updateFetchStateOrThrow, docs/kafka-replication.md §1.3 and §2.1).
func (r *Replica) updateFollower(f *follower, req FetchRequest) {
	leaderLEO := r.leo // sampled before the read
	switch {
	case req.FetchOffset >= leaderLEO:
		f.lastCaughtUpTime = max(f.lastCaughtUpTime, r.now)
	case req.FetchOffset >= f.lastFetchLeaderLEO:
		// Caught up to where the leader was at the previous fetch
		// (docs/kafka-replication.md §2.1).
		f.lastCaughtUpTime = max(f.lastCaughtUpTime, f.lastFetchTime)
	}
	f.lastFetchLeaderLEO = max(f.lastFetchLeaderLEO, leaderLEO)
	f.lastFetchTime = r.now
	f.logStart = req.LogStartOffset
	f.brokerEpoch = req.BrokerEpoch
	// The follower's acknowledgement: what it has flushed (the durability
	// rule). It counts toward the HW and the ISR; the fetch offset, what
	// it holds, decides whether it is caught up (above).
	acked := req.FetchOffset - max(min(req.Unflushed, req.FetchOffset), 0)
	changed := f.leo != acked
	f.leo = acked
	r.maybeExpandISR(f)
	if changed {
		r.maybeIncrementHW()
	}
}

// maybeIncrementHW is Partition.maybeIncrementLeaderHW
// (docs/kafka-replication.md §1.4): the minimum LEO over the maximal ISR and
// the caught-up eligible replicas, monotonic, frozen while the committed ISR is
// below the effective min ISR. The leader's own LEO counts only up to what it
// has flushed (the durability rule); a follower's LEO is the flushed offset
// its last fetch reported (FetchRequest.Unflushed).
func (r *Replica) maybeIncrementHW() {
	if len(r.isr) < r.minIS { // strict min ISR (KAFKA-15583)
		return
	}
	hw := r.flushed
	for i := range r.followers {
		f := &r.followers[i]
		if f.leo < hw && (f.inISR || f.inPending || (r.caughtUp(f) && r.eligible(f))) {
			hw = f.leo
		}
	}
	if hw > r.hw {
		r.setHW(hw)
		r.completeAcks()
	}
}

// caughtUp is Replica.isCaughtUp (docs/kafka-replication.md §2.1).
func (r *Replica) caughtUp(f *follower) bool {
	return f.leo == r.leo || r.now-f.lastCaughtUpTime <= r.cfg.LagTimeMaxMs
}

// eligible: not fenced or shutting down, and the broker epoch of its fetches
// matches the metadata, or is unknown (-1: Fetch before v15 carries none)
// (KIP-841, KIP-903, docs/kafka-replication.md §2.3).
func (r *Replica) eligible(f *follower) bool {
	return !f.ineligible && (f.metaBrokerEpoch < 0 || f.brokerEpoch < 0 || f.brokerEpoch == f.metaBrokerEpoch)
}

func (r *Replica) maximalSize() int {
	n := 1
	for i := range r.followers {
		if r.followers[i].inISR || r.followers[i].inPending {
			n++
		}
	}
	return n
}

func (r *Replica) follower(id int32) *follower {
	for i := range r.followers {
		if r.followers[i].id == id {
			return &r.followers[i]
		}
	}
	return nil
}

// refreshMembership recomputes the per-follower ISR flags.
func (r *Replica) refreshMembership() {
	for i := range r.followers {
		f := &r.followers[i]
		f.inISR = slices.Contains(r.isr, f.id)
		f.inPending = r.pending != nil && slices.Contains(r.pending.NewISR, f.id)
	}
}

// maybeExpandISR adds a follower that has reached both the HW and the
// leader-epoch start offset (docs/kafka-replication.md §2.3; the latter is
// KAFKA-7128), and whose log starts where the leader's does. The last
// condition is sluice's, not Kafka's: a DeleteRecords answered while the
// follower was down (not counted in the low watermark) must not come undone
// if the follower joins the ISR and is elected before a fetch response has
// told it the log start; it costs the follower one more fetch.
func (r *Replica) maybeExpandISR(f *follower) {
	if r.pending != nil || f.inISR || !r.eligible(f) {
		return
	}
	if f.leo < r.hw || f.leo < r.epochStart || f.logStart < r.logStart {
		return
	}
	newISR := append(slices.Clone(r.isr), f.id)
	slices.Sort(newISR)
	r.propose(newISR) // counts at once in the maximal ISR (docs/kafka-replication.md §2.3)
}

// maybeShrinkISR removes ISR members that are not caught up
// (docs/kafka-replication.md §2.2). The maximal ISR stays the old one until the
// controller commits.
func (r *Replica) maybeShrinkISR() {
	if r.pending != nil {
		return
	}
	var out []int32
	for i := range r.followers {
		f := &r.followers[i]
		if f.inISR && !r.caughtUp(f) {
			out = append(out, f.id)
		}
	}
	if len(out) == 0 {
		return
	}
	newISR := make([]int32, 0, len(r.isr))
	for _, id := range r.isr {
		if !slices.Contains(out, id) {
			newISR = append(newISR, id)
		}
	}
	r.propose(newISR)
}

func (r *Replica) propose(newISR []int32) {
	r.seq++
	p := &AlterPartitionRequest{
		Seq: r.seq, Leader: r.cfg.ID, LeaderEpoch: r.leaderEpoch,
		PartitionEpoch: r.partitionEpoch, NewISR: newISR,
		BrokerEpochs: make([]int64, len(newISR)),
	}
	for i, id := range newISR {
		p.BrokerEpochs[i] = r.cfg.BrokerEpoch
		if f := r.follower(id); f != nil {
			p.BrokerEpochs[i] = f.brokerEpoch
		}
	}
	r.pending = p
	r.sendPending = true
	r.maybeSendProposal()
	r.refreshMembership()
}

// isrRetryBackoffMs is the pause before a proposal the controller could not
// answer is sent again (Kafka's AlterPartitionManager retries after a
// backoff too).
const isrRetryBackoffMs = 500

// maybeSendProposal puts the pending proposal in Ready when it wants
// sending, none is with the controller, and its retry pause is over: the
// machine keeps at most one AlterPartition in flight, and a proposal made
// meanwhile goes once the answer arrives (docs/kafka-replication.md §2.4).
func (r *Replica) maybeSendProposal() {
	if r.cfg.DropQueuedProposal && r.inflight != 0 {
		r.sendPending = false
	}
	if r.role != RoleLeader || r.pending == nil || !r.sendPending || r.inflight != 0 || r.now < r.retryAt {
		return
	}
	r.rd.ISRProposal = r.pending
	r.inflight = r.pending.Seq
	r.sendPending = false
}

// InflightISR returns the Seq of the proposal with the controller, 0 if
// none.
func (r *Replica) InflightISR() uint64 { return r.inflight }

// ISRChangeResult applies the controller's answer to an ISR proposal
// (Partition.submitAlterPartition, docs/kafka-replication.md §2.4).
func (r *Replica) ISRChangeResult(res AlterPartitionResult) {
	if res.Seq == r.inflight {
		r.inflight = 0
	}
	defer r.maybeSendProposal() // one made while this was in flight
	p := r.pending
	if r.role != RoleLeader || p == nil || p.Seq != res.Seq ||
		p.LeaderEpoch != r.leaderEpoch || p.PartitionEpoch != r.partitionEpoch {
		return // the partition state changed while it was in flight
	}
	switch res.Error {
	case ErrNone:
		if res.LeaderEpoch != r.leaderEpoch || res.PartitionEpoch <= r.partitionEpoch {
			return
		}
		r.isr = append(r.isr[:0], res.ISR...)
		r.partitionEpoch = res.PartitionEpoch
		r.pending = nil
		r.refreshMembership()
		r.maybeIncrementHW()
	case ErrIneligibleReplica, ErrOperationNotAttempted:
		// Nothing was applied: revert to the committed state.
		r.pending = nil
		r.refreshMembership()
		r.maybeIncrementHW()
	case ErrFencedLeaderEpoch, ErrInvalidUpdateVersion, ErrInvalidRequest, ErrNewLeaderElected:
		// Stay pending until new metadata arrives.
	default:
		// The controller could not answer: send it again after a pause.
		r.sendPending = true
		r.retryAt = r.now + isrRetryBackoffMs
	}
}

// LowWatermark is Partition.lowWatermarkIfLeader: the lowest log start
// offset of the leader and every follower on a live broker (not fenced or
// shutting down, KIP-841) or in the ELR (KIP-966: it may be elected while
// fenced), as the followers' fetches last reported it; -1 while such a
// follower has not reported one, or when not leading. DeleteRecords
// answers once it reaches the requested offset, so deleted records cannot
// come back with a new leader.
func (r *Replica) LowWatermark() int64 {
	if r.role != RoleLeader {
		return -1
	}
	lw := r.logStart
	for i := range r.followers {
		f := &r.followers[i]
		if (!f.ineligible || f.inELR) && f.logStart < lw {
			lw = f.logStart
		}
	}
	return lw
}
