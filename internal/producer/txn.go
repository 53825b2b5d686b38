package producer

import "errors"

// Transactions, as Kafka's ProducerStateManager tracks them per partition:
// a producer's first transactional batch opens a transaction at its base
// offset (currentTxnFirstOffset); the coordinator's marker (a control batch,
// COMMIT or ABORT) ends it. The first offset of the oldest open
// transaction bounds the last stable offset (docs/transactions.md).

// ErrCoordinatorFenced is returned by CheckMarker for a marker written by
// an older transaction coordinator than the producer's last one.
var ErrCoordinatorFenced = errors.New("producer: transaction coordinator fenced")

// Completed is a transaction ended by a marker.
type Completed struct {
	ProducerID  int64
	FirstOffset int64 // the transaction's first batch
	LastOffset  int64 // the marker
	Aborted     bool
}

// BeginTxn records a transactional batch of pid at offset first: it opens
// a transaction unless one is open already. Call it after Update.
func (s *State) BeginTxn(pid, first int64) {
	if pid < 0 {
		return
	}
	if _, open := s.open[pid]; !open {
		s.open[pid] = first
	}
}

// OpenTxn returns the first offset of pid's ongoing transaction.
func (s *State) OpenTxn(pid int64) (int64, bool) {
	first, ok := s.open[pid]
	return first, ok
}

// OpenTxns is the number of ongoing transactions.
func (s *State) OpenTxns() int { return len(s.open) }

// FirstOpenTxn returns the lowest first offset of any ongoing transaction.
func (s *State) FirstOpenTxn() (int64, bool) {
	lowest, found := int64(0), false
	for _, first := range s.open {
		if !found || first < lowest {
			lowest, found = first, true
		}
	}
	return lowest, found
}

// StableAfter is the last stable offset the aborted-transaction index
// records with the marker that completed c (Kafka's AbortedTxn
// lastStableOffset): the first offset of the oldest transaction still
// open, or the offset after the marker. Call it right after EndTxn.
func (s *State) StableAfter(c Completed) int64 {
	if first, open := s.FirstOpenTxn(); open {
		return first
	}
	return c.LastOffset + 1
}

// EachOpenTxn calls fn for every ongoing transaction, in no order.
func (s *State) EachOpenTxn(fn func(pid, first int64)) {
	for pid, first := range s.open {
		fn(pid, first)
	}
}

// CheckMarker validates a transaction marker for pid before it is written
// (Kafka's ProducerAppendInfo.appendEndTxnMarker): its producer epoch may
// not be older than the producer's, nor its coordinator epoch older than
// the last marker's.
func (s *State) CheckMarker(pid int64, epoch int16, coordinatorEpoch int32) error {
	e := s.m[pid]
	if e == nil {
		return nil
	}
	if epoch < e.Epoch {
		return ErrInvalidProducerEpoch
	}
	if coordinatorEpoch < e.CoordinatorEpoch {
		return ErrCoordinatorFenced
	}
	return nil
}

// EndTxn records a marker of pid at offset (leader, follower and recovery
// alike). It returns the transaction it ended; ok is false when pid had no
// transaction open here (a marker for a partition the producer never
// wrote to). A newer producer epoch (transaction version 2 bumps it at
// every commit) resets the retained batches, as Update does.
func (s *State) EndTxn(pid int64, epoch int16, coordinatorEpoch int32, offset, timestamp int64, aborted bool) (Completed, bool) {
	e := s.m[pid]
	if e == nil {
		if len(s.m) >= MaxProducers {
			s.evictOldest()
		}
		e = &Entry{ProducerID: pid, Epoch: epoch}
		s.m[pid] = e
	}
	if epoch != e.Epoch {
		e.Epoch = epoch
		e.Batches = e.Batches[:0]
	}
	e.CoordinatorEpoch = coordinatorEpoch
	if timestamp > e.LastTime {
		e.LastTime = timestamp
	}
	first, ok := s.open[pid]
	if !ok {
		return Completed{}, false
	}
	delete(s.open, pid)
	return Completed{ProducerID: pid, FirstOffset: first, LastOffset: offset, Aborted: aborted}, true
}

// Reopen puts back an ongoing transaction whose marker a truncation cut.
func (s *State) Reopen(pid, first int64) {
	if _, ok := s.m[pid]; !ok {
		s.m[pid] = &Entry{ProducerID: pid, CoordinatorEpoch: -1}
	}
	s.open[pid] = first
}

// Each calls fn for every producer entry, in no order. fn must not modify
// the entry.
func (s *State) Each(fn func(e *Entry)) {
	for _, e := range s.m {
		fn(e)
	}
}
