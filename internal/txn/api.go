package txn

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/group"
)

// InitResult is InitProducerId's answer: an error, or the producer id and
// epoch to use.
type InitResult struct {
	Err        *kerr.Error
	ProducerID int64
	Epoch      int16
}

// EndResult is EndTxn's answer; with transaction version 2 it carries the
// producer id and epoch of the next transaction (KIP-890 part 2), else -1.
type EndResult struct {
	Err        *kerr.Error
	ProducerID int64
	Epoch      int16
}

func initErr(e *kerr.Error) Result[InitResult] {
	return ready(InitResult{Err: e, ProducerID: -1, Epoch: -1})
}

func endErr(e *kerr.Error) Result[EndResult] {
	return ready(EndResult{Err: e, ProducerID: -1, Epoch: -1})
}

// validID checks a transactional id: Kafka refuses an empty one.
func validID(id string) *kerr.Error {
	if id == "" || len(id) > MaxTransactionalIDBytes {
		return kerr.InvalidRequest
	}
	return nil
}

// InitProducerID serves InitProducerId for transactional id id
// (TransactionCoordinator.handleInitProducerId). pid and epoch are the
// producer's current ones (KIP-360, v3+), -1 when it has none. A new id
// gets a new producer id at epoch 0; a known one gets its epoch bumped,
// which fences the previous instance; an ongoing transaction is first
// aborted at a bumped epoch and CONCURRENT_TRANSACTIONS answered until
// that completes; an exhausted epoch moves to a new producer id.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, pid int64, epoch int16) Result[InitResult] {
	if err := validID(id); err != nil {
		return initErr(err)
	}
	timeout := time.Duration(timeoutMs) * time.Millisecond
	if timeoutMs <= 0 || timeout > c.cfg.MaxTimeout {
		return initErr(kerr.InvalidTransactionTimeout)
	}
	var expected *int16
	switch {
	case pid < 0 && epoch < 0:
	case pid < 0 || epoch < 0:
		return initErr(kerr.InvalidRequest)
	default:
		expected = &epoch
	}
	newPID := int64(-1)
	for {
		var res Result[InitResult]
		alloc := false
		err := c.run(id, func(s *shard) {
			dirty := !s.Readable() && !c.knobs.ReadUncommitted
			if res, alloc = c.initEvent(s, id, timeout, pid, expected, newPID); alloc {
				return
			}
			res = fromCommitted(s, dirty, res, func(s *shard) Result[InitResult] {
				r, alloc := c.initEvent(s, id, timeout, pid, expected, newPID)
				if alloc {
					// The committed state needs a new producer id,
					// which is not allocated on the owner: the
					// client retries.
					return initErr(kerr.ConcurrentTransactions)
				}
				return r
			}, initErr)
		})
		if err != nil {
			return initErr(err)
		}
		if !alloc {
			return res
		}
		// Allocating goes through the controller: not on the shard's
		// owner.
		var aerr error
		if newPID, aerr = c.b.AllocateProducerID(); aerr != nil {
			c.log.Warn("allocating a producer id", "err", aerr)
			return initErr(kerr.CoordinatorNotAvailable)
		}
	}
}

// initEvent is InitProducerID's event on the owner of id's shard: alloc
// if the id needs a new producer id and newPID is not one yet.
func (c *Coordinator) initEvent(s *shard, id string, timeout time.Duration, pid int64, expected *int16, newPID int64) (res Result[InitResult], alloc bool) {
	m := s.State().txns[id]
	needPID := m == nil
	if m != nil && m.pending == nil && EpochExhausted(m.Epoch) && (expected == nil || *expected == m.Epoch) {
		switch m.State {
		case Empty, CompleteCommit, CompleteAbort:
			needPID = true
		}
	}
	if needPID && newPID < 0 {
		return res, true
	}
	return c.initLocked(s, id, m, timeout, pid, expected, newPID), false
}

func (c *Coordinator) initLocked(s *shard, id string, m *Metadata, timeout time.Duration, pid int64, expected *int16, newPID int64) Result[InitResult] {
	now := c.clock.Now()
	if m == nil {
		if c.numIDs.Load() >= MaxTransactionalIDs {
			c.log.Warn("too many transactional ids", "max", MaxTransactionalIDs)
			return initErr(kerr.CoordinatorNotAvailable)
		}
		m = NewMetadata(id, newPID, timeout, now)
		s.State().txns[id] = m
		c.numIDs.Add(1)
	}
	if m.InTransition() {
		// First, as Kafka's prepareInitProducerIdTransit: a transit
		// being written, or the markers of a prepared transaction.
		return initErr(kerr.ConcurrentTransactions)
	}
	// KIP-360: the producer's id must be this one, or the previous one at
	// an exhausted epoch (a retry after a rotation), unless the id is new.
	if expected != nil && m.Epoch != noEpoch && pid != m.ProducerID &&
		!(pid == m.PrevProducerID && EpochExhausted(*expected)) {
		return initErr(kerr.ProducerFenced)
	}
	var t *Transit
	var err error
	switch m.State {
	case Ongoing:
		// Abort the ongoing transaction at a bumped epoch first; the
		// client retries and gets a second bump (or a new id if that
		// one exhausted the epoch).
		c.fenceAndAbort(s, m, "producer re-initialized")
		return initErr(kerr.ConcurrentTransactions)
	case Empty, CompleteCommit, CompleteAbort:
		if EpochExhausted(m.Epoch) && (expected == nil || *expected == m.Epoch) {
			t, err = m.PrepareRotate(newPID, timeout, expected != nil, now)
		} else {
			t, err = m.PrepareInit(timeout, expected, now)
		}
	default:
		return initErr(kerr.ConcurrentTransactions)
	}
	if err != nil {
		return initErr(kerrOf(err))
	}
	ch := make(chan InitResult, 1)
	c.write(s, m, t, func(err *kerr.Error) {
		if err != nil {
			ch <- InitResult{Err: err, ProducerID: -1, Epoch: -1}
			return
		}
		ch <- InitResult{ProducerID: t.ProducerID, Epoch: t.Epoch}
	})
	return waitOn(ch)
}

// kerrOf maps a state-machine error to its Kafka error.
func kerrOf(err error) *kerr.Error {
	if ke, ok := err.(*kerr.Error); ok {
		return ke
	}
	return kerr.UnknownServerError
}

// fenceAndAbort aborts m's ongoing transaction without its producer, at a
// bumped epoch (owner): the PrepareAbort record, then the markers.
//
// The abort is not the client's, so its markers carry the cluster's
// finalized transaction.version (Kafka's endTransaction with
// isFromClient=false and txnManager.transactionVersionLevel): under
// version 2 a partition then refuses a late copy of them once the
// producer's next transaction is open there, whatever version the
// transaction's own requests had told the coordinator so far (none, for
// a producer's first transaction).
func (c *Coordinator) fenceAndAbort(s *shard, m *Metadata, why string) {
	t, err := m.PrepareFence(int16(c.b.Config().Int("sluice.transaction.version", 2)), c.clock.Now())
	if err != nil {
		c.log.Warn("cannot fence transaction", "id", m.ID, "epoch", m.Epoch, "err", err)
		return
	}
	c.log.Info("aborting transaction", "id", m.ID, "producer.id", m.ProducerID, "epoch", t.Epoch, "reason", why)
	c.write(s, m, t, func(err *kerr.Error) {
		if err == nil {
			c.startMarkers(s, m)
		}
	})
}

// checkProducer is the common check of AddPartitionsToTxn and
// AddOffsetsToTxn (handleAddPartitionsToTransaction): no change may be
// under way (CONCURRENT_TRANSACTIONS), and the id must be known with this
// producer id and epoch. The change comes first, as in Kafka since
// KAFKA-18660: under transaction version 2 the producer starts its next
// transaction at the epoch, or the producer id, its EndTxn answered while
// the previous one's markers are still written, and must wait for them
// rather than fail the epoch and state checks.
func checkProducer(m *Metadata, pid int64, epoch int16) *kerr.Error {
	switch {
	case m == nil:
		return kerr.InvalidProducerIDMapping
	case m.InTransition():
		return kerr.ConcurrentTransactions
	case m.ProducerID != pid:
		return kerr.InvalidProducerIDMapping
	case m.Epoch != epoch:
		return kerr.ProducerFenced
	case m.State == Dead:
		return kerr.InvalidProducerIDMapping
	}
	return nil
}

// AddPartitions serves AddPartitionsToTxn for one transactional id
// (handleAddPartitionsToTransaction): the partitions join the transaction,
// which begins if none is ongoing. The error applies to every partition.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, parts []Partition) Result[*kerr.Error] {
	if err := validID(id); err != nil {
		return ready(err)
	}
	var res Result[*kerr.Error]
	if err := c.run(id, func(s *shard) {
		dirty := !s.Readable() && !c.knobs.ReadUncommitted
		res = fromCommitted(s, dirty, c.addLocked(s, id, pid, epoch, parts), func(s *shard) Result[*kerr.Error] {
			return c.addLocked(s, id, pid, epoch, parts)
		}, ready[*kerr.Error])
	}); err != nil {
		return ready(err)
	}
	return res
}

// addLocked is AddPartitions on the owner of id's shard.
func (c *Coordinator) addLocked(s *shard, id string, pid int64, epoch int16, parts []Partition) Result[*kerr.Error] {
	m := s.State().txns[id]
	if err := checkProducer(m, pid, epoch); err != nil {
		if err == kerr.ConcurrentTransactions && !c.stepped {
			// The previous transaction is still completing (its markers
			// are being written): rather than have the producer back off
			// and retry (the Java client waits 20 ms, franz-go more),
			// hold the request until it completes, at most
			// concurrentWait, then answer as Kafka would. A stepped
			// coordinator answers at once, as Kafka does.
			changed := s.State().changed
			return Result[*kerr.Error]{Wait: func() *kerr.Error {
				return c.retryAddPartitions(changed, id, pid, epoch, parts)
			}}
		}
		return ready(err)
	}
	if m.State == Ongoing {
		all := true
		n := len(m.Partitions)
		for _, p := range parts {
			if _, ok := m.Partitions[p]; !ok {
				all = false
				n++
			}
		}
		if all {
			// Nothing to write: the answer is the state's, which
			// AddPartitions answers once committed (fromCommitted).
			// Answered from a state above the HW (a load reads to
			// the log end; a write may be pending), a coordinator
			// elected next might not know the partition is in the
			// transaction, end it without a marker there and leave
			// the records the producer writes on this answer open.
			return ready[*kerr.Error](nil)
		}
		if n > MaxPartitionsPerTxn {
			return ready(kerr.InvalidRequest)
		}
	} else if len(parts) > MaxPartitionsPerTxn {
		return ready(kerr.InvalidRequest)
	}
	t, perr := m.PrepareAddPartitions(parts, c.clock.Now())
	if perr != nil {
		return ready(kerrOf(perr))
	}
	ch := make(chan *kerr.Error, 1)
	c.write(s, m, t, func(err *kerr.Error) { ch <- err })
	return waitOn(ch)
}

// concurrentWait bounds how long AddPartitionsToTxn is held while the
// previous transaction of its id completes.
const concurrentWait = 500 * time.Millisecond

// retryAddPartitions waits for a transition of the shard (changed) or
// concurrentWait, then serves the request again; still concurrent at the
// deadline, it answers CONCURRENT_TRANSACTIONS.
func (c *Coordinator) retryAddPartitions(changed <-chan struct{}, id string, pid int64, epoch int16, parts []Partition) *kerr.Error {
	deadline := c.clock.NewTimer(concurrentWait)
	defer deadline.Stop()
	for {
		select {
		case <-changed:
		case <-deadline.C():
			return kerr.ConcurrentTransactions
		}
		again := false
		if err := c.run(id, func(s *shard) {
			if err := checkProducer(s.State().txns[id], pid, epoch); err == kerr.ConcurrentTransactions {
				changed, again = s.State().changed, true
			}
		}); err != nil {
			return err
		}
		if again {
			continue
		}
		return c.AddPartitions(id, pid, epoch, parts).Get()
	}
}

// VerifyPartitions answers AddPartitionsToTxn's VerifyOnly form (KIP-890
// part 1, sent by partition leaders before a transactional produce): the
// error of each partition, INVALID_TXN_STATE for one not in the ongoing
// transaction. Nothing is added.
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, parts []Partition) map[Partition]*kerr.Error {
	if err := validID(id); err != nil {
		return allParts(parts, err)
	}
	var res map[Partition]*kerr.Error
	ch := make(chan map[Partition]*kerr.Error, 1)
	if err := c.run(id, func(s *shard) {
		if s.Readable() {
			res = verifyLocked(s, id, pid, epoch, parts)
			return
		}
		// A partition shown in the transaction by a record above the
		// HW may not be in it for a coordinator elected next: the
		// producer would write records no marker ends.
		s.Read(func(err error) {
			if err != nil {
				ch <- allParts(parts, commitError(err))
				return
			}
			ch <- verifyLocked(s, id, pid, epoch, parts)
		})
	}); err != nil {
		return allParts(parts, err)
	}
	if res != nil {
		return res
	}
	if c.stepped {
		// The stepper cannot wait for the commit: the leader retries.
		select {
		case res = <-ch:
			return res
		default:
			return allParts(parts, kerr.ConcurrentTransactions)
		}
	}
	return <-ch
}

// allParts is an answer of VerifyPartitions with err for every partition.
func allParts(parts []Partition, err *kerr.Error) map[Partition]*kerr.Error {
	out := make(map[Partition]*kerr.Error, len(parts))
	for _, p := range parts {
		out[p] = err
	}
	return out
}

// verifyLocked is VerifyPartitions on the owner of id's shard.
func verifyLocked(s *shard, id string, pid int64, epoch int16, parts []Partition) map[Partition]*kerr.Error {
	m := s.State().txns[id]
	// handleVerifyPartitionsInTransaction, but with the markers of a
	// prepared transaction first, as for an add (checkProducer). A
	// transit being written does not stop the verification
	// (KAFKA-14904): the partitions already in the transaction stay in
	// it.
	switch {
	case m == nil:
		return allParts(parts, kerr.InvalidProducerIDMapping)
	case m.MarkersPending():
		return allParts(parts, kerr.ConcurrentTransactions)
	case m.ProducerID != pid || m.State == Dead:
		return allParts(parts, kerr.InvalidProducerIDMapping)
	case m.Epoch != epoch:
		return allParts(parts, kerr.ProducerFenced)
	}
	out := make(map[Partition]*kerr.Error, len(parts))
	for _, p := range parts {
		if _, ok := m.Partitions[p]; ok && m.State == Ongoing {
			out[p] = nil
		} else {
			out[p] = kerr.InvalidTxnState
		}
	}
	return out
}

// OffsetsPartition is the __consumer_offsets partition of a group: the
// partition AddOffsetsToTxn adds to the transaction.
func (c *Coordinator) OffsetsPartition(groupID string) Partition {
	n := c.cfg.OffsetsPartitions
	if t := c.b.Image().Topics[group.OffsetsTopic]; t != nil && len(t.Partitions) > 0 {
		n = int32(len(t.Partitions))
	}
	return Partition{group.OffsetsTopic, group.PartitionFor(groupID, n)}
}

// AddOffsets serves AddOffsetsToTxn: the group's __consumer_offsets
// partition joins the transaction.
func (c *Coordinator) AddOffsets(id string, pid int64, epoch int16, groupID string) Result[*kerr.Error] {
	return c.AddPartitions(id, pid, epoch, []Partition{c.OffsetsPartition(groupID)})
}

// EndTxn serves EndTxn (handleEndTransaction): PrepareCommit or
// PrepareAbort is written, the producer answered, and the markers sent in
// the background. A retry of an end already done (or under way) answers
// NONE (or CONCURRENT_TRANSACTIONS). txnVersion 2 (EndTxn v5, KIP-890
// part 2) bumps the epoch and returns the next producer id and epoch.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool, txnVersion int16) Result[EndResult] {
	if err := validID(id); err != nil {
		return endErr(err)
	}
	newPID := int64(-1)
	for {
		var res Result[EndResult]
		alloc := false
		err := c.run(id, func(s *shard) {
			dirty := !s.Readable() && !c.knobs.ReadUncommitted
			if res, alloc = c.endEvent(s, id, pid, epoch, commit, txnVersion, newPID); alloc {
				return
			}
			// A retry answered NONE from a completion above the HW
			// would report a transaction ended that a coordinator
			// elected next may still see ongoing, and abort.
			res = fromCommitted(s, dirty, res, func(s *shard) Result[EndResult] {
				r, alloc := c.endEvent(s, id, pid, epoch, commit, txnVersion, newPID)
				if alloc {
					return endErr(kerr.ConcurrentTransactions) // the client retries
				}
				return r
			}, endErr)
		})
		if err != nil {
			return endErr(err)
		}
		if !alloc {
			return res
		}
		var aerr error
		if newPID, aerr = c.b.AllocateProducerID(); aerr != nil {
			return endErr(kerr.CoordinatorNotAvailable)
		}
	}
}

// endEvent is EndTxn's event on the owner of id's shard: alloc if the
// epoch bump of transaction version 2 needs a new producer id and newPID
// is not one yet.
func (c *Coordinator) endEvent(s *shard, id string, pid int64, epoch int16, commit bool, txnVersion int16, newPID int64) (res Result[EndResult], alloc bool) {
	m := s.State().txns[id]
	if txnVersion >= 2 && m != nil && m.State == Ongoing && m.pending == nil && m.ProducerID == pid &&
		m.Epoch == epoch && EpochExhausted(m.Epoch) && newPID < 0 {
		return res, true
	}
	return c.endLocked(s, m, pid, epoch, commit, txnVersion, newPID), false
}

func (c *Coordinator) endLocked(s *shard, m *Metadata, pid int64, epoch int16, commit bool, tv int16, newPID int64) Result[EndResult] {
	if m == nil {
		return endErr(kerr.InvalidProducerIDMapping)
	}
	// A transaction version 2 retry comes at the epoch before the bump,
	// or at the exhausted epoch of the previous producer id.
	retry := tv >= 2 && m.State != Ongoing &&
		((pid == m.ProducerID && epoch == m.LastEpoch && epoch >= 0) ||
			(pid == m.PrevProducerID && m.Epoch == 0 && EpochExhausted(epoch)))
	// Under transaction version 2 the producer may end its next
	// transaction with the producer id the completion of the previous one
	// moves to, before that completion is written.
	nextID := tv >= 2 && m.InTransition() && m.NextProducerID >= 0 && pid == m.NextProducerID
	switch {
	case m.ProducerID != pid && !retry && !nextID:
		return endErr(kerr.InvalidProducerIDMapping)
	case tv >= 2 && m.InTransition():
		// Before the epoch check (Kafka's endTransaction, KAFKA-18464):
		// the producer ends its next transaction, an empty abort or
		// not, at the epoch the previous EndTxn answered, while that
		// transaction's markers are still written; it retries once they
		// are.
		return endErr(kerr.ConcurrentTransactions)
	case m.Epoch != epoch && !retry:
		return endErr(kerr.ProducerFenced)
	case m.InTransition():
		// endTransactionWithTV1: the same epoch ends a prepared
		// transaction again while its markers are written.
		return endErr(kerr.ConcurrentTransactions)
	}
	// The retry of a completed end answers NONE. With transaction
	// version 2 only a retry (at the epoch before the bump) is one: the
	// current epoch on a completed transaction names the next, empty,
	// transaction (INVALID_TXN_STATE; Kafka 4 aborts an empty one with an
	// epoch bump, which sluice does not do).
	done := func() Result[EndResult] {
		if tv >= 2 {
			if !retry {
				return endErr(kerr.InvalidTxnState)
			}
			return ready(EndResult{ProducerID: m.ProducerID, Epoch: m.Epoch})
		}
		return ready(EndResult{ProducerID: -1, Epoch: -1})
	}
	emptyAbort := tv >= 2 && !retry && !commit && (m.State == Empty || m.State == CompleteCommit || m.State == CompleteAbort)
	switch {
	case emptyAbort:
		// Transaction version 2 (Kafka 4): aborting a transaction with
		// nothing in it succeeds and bumps the epoch, like any end; no
		// marker is written. Clients rely on it (franz-go aborts when
		// unsure whether anything was produced).
	case m.State == Ongoing:
	case m.State == CompleteCommit:
		if commit {
			return done()
		}
		return endErr(kerr.InvalidTxnState)
	case m.State == CompleteAbort:
		if !commit {
			return done()
		}
		return endErr(kerr.InvalidTxnState)
	default:
		return endErr(kerr.InvalidTxnState)
	}
	next := int64(-1)
	if tv >= 2 && EpochExhausted(m.Epoch) {
		next = newPID
	}
	t, err := m.PrepareEnd(commit, tv, next, c.clock.Now())
	if err != nil {
		return endErr(kerrOf(err))
	}
	ch := make(chan EndResult, 1)
	answer := func() {
		switch {
		case tv < 2:
			ch <- EndResult{ProducerID: -1, Epoch: -1}
		case t.NextProducerID >= 0:
			ch <- EndResult{ProducerID: t.NextProducerID, Epoch: 0}
		default:
			ch <- EndResult{ProducerID: t.ProducerID, Epoch: t.Epoch}
		}
	}
	early := c.knobs.AnswerEndTxnEarly
	if early {
		answer() // the bug: before PrepareCommit/PrepareAbort is committed
	}
	c.write(s, m, t, func(err *kerr.Error) {
		if err != nil {
			if !early {
				ch <- EndResult{Err: err, ProducerID: -1, Epoch: -1}
			}
			return
		}
		c.startMarkers(s, m)
		if !early {
			answer()
		}
	})
	return waitOn(ch)
}
