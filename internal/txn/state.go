package txn

// The per-transactional-id state machine, Kafka's TransactionMetadata and
// TransactionState. It does no I/O: every change is prepared first (a
// Transit, written to __transaction_state by the coordinator) and applied
// with Complete once the record is durable. While a transit is pending no
// other change is prepared (CONCURRENT_TRANSACTIONS).

import (
	"errors"
	"math"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transaction's state, numbered as in TransactionLogValue.
type State int8

// The states of Kafka's TransactionState.
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
	"CompleteAbort", "Dead", "PrepareEpochFence"}

// String is the state's name in Kafka (DescribeTransactions, ListTransactions).
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "Unknown"
	}
	return stateNames[s]
}

// validPrevious are the states each state may be entered from
// (TransactionState.validPreviousStates).
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort}, // the last three: an empty abort under transaction version 2
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteAbort, CompleteCommit},
	PrepareEpochFence: {Ongoing},
}

// CanTransition reports whether a transaction may go from one state to
// another.
func CanTransition(from, to State) bool {
	for _, s := range validPrevious[to] {
		if s == from {
			return true
		}
	}
	return false
}

// Partition is a topic partition in a transaction.
type Partition struct {
	Topic     string
	Partition int32
}

// noEpoch is RecordBatch.NO_PRODUCER_EPOCH; noID is NO_PRODUCER_ID.
const (
	noEpoch int16 = -1
	noID    int64 = -1
)

// EpochExhausted reports whether epoch leaves no room for another bump
// (TransactionMetadata.isEpochExhausted: Short.MaxValue - 1 and up; the
// last value is kept for fencing).
func EpochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// Metadata is one transactional id's state (TransactionMetadata).
type Metadata struct {
	ID string
	// ProducerID and Epoch are the producer's current id and epoch;
	// PrevProducerID is the id before the last rotation (KIP-360
	// retries) and NextProducerID the id the next completion moves to
	// (transaction version 2 at epoch exhaustion).
	ProducerID, PrevProducerID, NextProducerID int64
	Epoch                                      int16
	// LastEpoch is the epoch before the last bump, so that a retried
	// InitProducerId or EndTxn (v5) is recognized; in memory only, as in
	// Kafka.
	LastEpoch int16
	Timeout   time.Duration
	State     State
	// Partitions are the partitions of the ongoing (or completing)
	// transaction.
	Partitions map[Partition]struct{}
	// Start is when the transaction began (its first AddPartitionsToTxn),
	// zero outside one; LastUpdate is the last change.
	Start, LastUpdate time.Time
	// TxnVersion is the client's transaction version (2 with EndTxn v5,
	// KIP-890 part 2: an epoch bump at every EndTxn).
	TxnVersion int16

	// pending is the transit being written, nil if none.
	pending *Transit
	// failedFence is set when writing an epoch fence failed: a retry
	// does not bump again (hasFailedEpochFence).
	failedFence bool
}

// Transit is a prepared change (TxnTransitMetadata): the whole next
// state, written as one TransactionLogValue.
type Transit struct {
	ProducerID, PrevProducerID, NextProducerID int64
	Epoch, LastEpoch                           int16
	Timeout                                    time.Duration
	State                                      State
	Partitions                                 map[Partition]struct{}
	Start, LastUpdate                          time.Time
	TxnVersion                                 int16
	// fence marks the pending state as PrepareEpochFence (its record is
	// the PrepareAbort at the bumped epoch).
	fence bool
}

// NewMetadata returns a new transactional id's metadata: producer id pid,
// no epoch yet, Empty.
func NewMetadata(id string, pid int64, timeout time.Duration, now time.Time) *Metadata {
	return &Metadata{ID: id, ProducerID: pid, PrevProducerID: noID, NextProducerID: noID, Epoch: noEpoch,
		LastEpoch: noEpoch, Timeout: timeout, State: Empty, Partitions: map[Partition]struct{}{}, LastUpdate: now}
}

// Pending returns the transit being written, nil if none.
func (m *Metadata) Pending() *Transit { return m.pending }

// PendingState is the state being written: PrepareEpochFence for an
// epoch fence. ok is false when nothing is pending.
func (m *Metadata) PendingState() (s State, ok bool) {
	if m.pending == nil {
		return 0, false
	}
	if m.pending.fence {
		return PrepareEpochFence, true
	}
	return m.pending.State, true
}

// MarkersPending reports whether the transaction is prepared (PrepareCommit
// or PrepareAbort) and its completion waits for its markers: the phase in
// which Kafka's TransactionMetadata already holds the pending CompleteCommit
// or CompleteAbort (TransactionCoordinator.endTransaction prepares it as
// soon as the prepare record is durable, and a loaded prepared transaction
// too). Sluice writes that transit only once every marker is in.
func (m *Metadata) MarkersPending() bool {
	return m.State == PrepareCommit || m.State == PrepareAbort
}

// InTransition reports whether a change of the transaction is under way: a
// transit being written, or markers pending (MarkersPending). It is Kafka's
// TransactionMetadata.pendingTransitionInProgress, which the coordinator
// checks first and answers with the retriable CONCURRENT_TRANSACTIONS
// (KAFKA-18464, KAFKA-18660): under transaction version 2 the producer
// already holds the next transaction's epoch, or producer id, while the
// previous transaction's markers are written, and its requests must wait
// for them instead of failing the epoch and state checks.
func (m *Metadata) InTransition() bool { return m.pending != nil || m.MarkersPending() }

// ErrIllegalTransition is a prepare call from a state that does not allow
// it: a coordinator bug, answered as Kafka does with an unknown error.
var ErrIllegalTransition = errors.New("txn: illegal state transition")

func (m *Metadata) transit() *Transit {
	return &Transit{ProducerID: m.ProducerID, PrevProducerID: m.PrevProducerID, NextProducerID: m.NextProducerID,
		Epoch: m.Epoch, LastEpoch: m.LastEpoch, Timeout: m.Timeout, State: m.State,
		Partitions: m.Partitions, Start: m.Start, LastUpdate: m.LastUpdate, TxnVersion: m.TxnVersion}
}

// prepare validates and records t as pending.
func (m *Metadata) prepare(t *Transit) (*Transit, error) {
	if m.pending != nil {
		return nil, kerr.ConcurrentTransactions
	}
	from := m.State
	if !CanTransition(from, t.State) && !(t.fence && from == Ongoing) {
		return nil, ErrIllegalTransition
	}
	if t.State == Empty || t.State == CompleteCommit || t.State == CompleteAbort || t.State == Dead {
		t.Partitions = map[Partition]struct{}{}
		t.Start = time.Time{}
	}
	m.pending = t
	return t, nil
}

// Complete applies the pending transit t once its record is durable
// (completeTransitionTo).
func (m *Metadata) Complete(t *Transit) {
	if m.pending != t {
		return
	}
	m.pending = nil
	m.failedFence = false
	m.ProducerID, m.PrevProducerID, m.NextProducerID = t.ProducerID, t.PrevProducerID, t.NextProducerID
	m.Epoch, m.LastEpoch = t.Epoch, t.LastEpoch
	m.Timeout, m.State, m.Partitions = t.Timeout, t.State, t.Partitions
	m.Start, m.LastUpdate, m.TxnVersion = t.Start, t.LastUpdate, t.TxnVersion
}

// Abandon drops the pending transit t after its write failed. A failed
// epoch fence is remembered so that its retry reuses the bumped epoch
// instead of bumping again.
func (m *Metadata) Abandon(t *Transit) {
	if m.pending != t {
		return
	}
	if t.fence {
		m.failedFence = true
	}
	m.pending = nil
}

// PrepareInit prepares InitProducerId's epoch bump to Empty
// (prepareIncrementProducerEpoch). expected is the producer's current
// epoch when it sent one (KIP-360), else nil. A retry of a bump whose
// answer was lost keeps the current epoch.
func (m *Metadata) PrepareInit(timeout time.Duration, expected *int16, now time.Time) (*Transit, error) {
	if EpochExhausted(m.Epoch) {
		return nil, ErrIllegalTransition
	}
	t := m.transit()
	t.State, t.Timeout, t.LastUpdate = Empty, timeout, now
	switch {
	case expected == nil:
		t.Epoch, t.LastEpoch = m.Epoch+1, noEpoch
	case m.Epoch == noEpoch || *expected == m.Epoch:
		t.Epoch, t.LastEpoch = m.Epoch+1, m.Epoch
	case *expected == m.LastEpoch:
		t.Epoch, t.LastEpoch = m.Epoch, m.LastEpoch
	default:
		return nil, kerr.ProducerFenced
	}
	return m.prepare(t)
}

// PrepareRotate prepares InitProducerId's move to a new producer id at
// epoch 0 when the epoch is exhausted (prepareProducerIdRotation).
// keepLast records the old epoch as LastEpoch (the producer sent it).
func (m *Metadata) PrepareRotate(newPID int64, timeout time.Duration, keepLast bool, now time.Time) (*Transit, error) {
	t := m.transit()
	t.State, t.Timeout, t.LastUpdate = Empty, timeout, now
	t.PrevProducerID, t.ProducerID, t.NextProducerID = m.ProducerID, newPID, noID
	t.Epoch, t.LastEpoch = 0, noEpoch
	if keepLast {
		t.LastEpoch = m.Epoch
	}
	return m.prepare(t)
}

// PrepareAddPartitions prepares adding parts to the transaction, which
// begins it (Ongoing, its start time set) if none is ongoing
// (prepareAddPartitions).
func (m *Metadata) PrepareAddPartitions(parts []Partition, now time.Time) (*Transit, error) {
	t := m.transit()
	t.State, t.LastUpdate = Ongoing, now
	t.Partitions = make(map[Partition]struct{}, len(m.Partitions)+len(parts))
	if m.State == Ongoing {
		for p := range m.Partitions {
			t.Partitions[p] = struct{}{}
		}
	} else {
		t.Start = now
	}
	for _, p := range parts {
		t.Partitions[p] = struct{}{}
	}
	return m.prepare(t)
}

// PrepareEnd prepares PrepareCommit or PrepareAbort (prepareAbortOrCommit).
// With transaction version 2 the epoch is bumped (KIP-890 part 2) and,
// when that exhausts it, nextPID is the producer id the completion moves
// to.
func (m *Metadata) PrepareEnd(commit bool, txnVersion int16, nextPID int64, now time.Time) (*Transit, error) {
	t := m.transit()
	t.State, t.LastUpdate, t.TxnVersion = PrepareAbort, now, txnVersion
	if commit {
		t.State = PrepareCommit
	}
	if txnVersion >= 2 {
		if m.Epoch == math.MaxInt16 {
			return nil, ErrIllegalTransition
		}
		t.LastEpoch = m.Epoch
		t.Epoch = m.Epoch + 1
		t.NextProducerID = nextPID
	}
	return m.prepare(t)
}

// PrepareFence prepares the epoch fence of an ongoing transaction that is
// to be aborted without its producer: InitProducerId from a new instance,
// or the transaction timeout (prepareFenceProducerEpoch). Its record is
// PrepareAbort at the bumped epoch; the producer's next request at the old
// epoch is fenced. A fence whose write failed is retried at the same
// epoch. serverTxnVersion is the cluster's finalized transaction.version,
// which the abort's record and markers carry.
func (m *Metadata) PrepareFence(serverTxnVersion int16, now time.Time) (*Transit, error) {
	if m.State != Ongoing {
		return nil, ErrIllegalTransition
	}
	if m.Epoch == math.MaxInt16 {
		return nil, ErrIllegalTransition
	}
	t := m.transit()
	t.State, t.LastUpdate, t.fence, t.TxnVersion = PrepareAbort, now, true, serverTxnVersion
	if !m.failedFence {
		t.LastEpoch, t.Epoch = m.Epoch, m.Epoch+1
	}
	return m.prepare(t)
}

// PrepareComplete prepares CompleteCommit or CompleteAbort once every
// marker is written (prepareComplete). A pending producer id rotation
// (transaction version 2) takes effect here, at epoch 0.
func (m *Metadata) PrepareComplete(now time.Time) (*Transit, error) {
	t := m.transit()
	switch m.State {
	case PrepareCommit:
		t.State = CompleteCommit
	case PrepareAbort:
		t.State = CompleteAbort
	default:
		return nil, ErrIllegalTransition
	}
	t.LastUpdate = now
	if m.NextProducerID >= 0 {
		t.PrevProducerID, t.ProducerID, t.NextProducerID = m.ProducerID, m.NextProducerID, noID
		t.Epoch, t.LastEpoch = 0, noEpoch
	}
	return m.prepare(t)
}

// PrepareDead prepares the removal of an expired transactional id
// (prepareDead); its record is a tombstone.
func (m *Metadata) PrepareDead(now time.Time) (*Transit, error) {
	t := m.transit()
	t.State, t.LastUpdate = Dead, now
	return m.prepare(t)
}

// TimedOut reports whether an ongoing transaction has been open longer
// than its timeout at now (abortTimedOutTransactions' filter).
func (m *Metadata) TimedOut(now time.Time) bool {
	return m.State == Ongoing && m.pending == nil && !m.Start.IsZero() && now.Sub(m.Start) > m.Timeout
}

// Expired reports whether the id is idle past expiration at now
// (removeExpiredTransactionalIds' filter: no transaction in progress).
func (m *Metadata) Expired(now time.Time, expiration time.Duration) bool {
	switch m.State {
	case Empty, CompleteCommit, CompleteAbort:
	default:
		return false
	}
	return m.pending == nil && now.Sub(m.LastUpdate) >= expiration
}

// SortedPartitions returns the transaction's partitions by topic, then
// partition.
func SortedPartitions(parts map[Partition]struct{}) []Partition {
	out := make([]Partition, 0, len(parts))
	for p := range parts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
