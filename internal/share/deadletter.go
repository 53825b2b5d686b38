package share

import (
	"context"
	"time"
)

// Archiving is Kafka's ARCHIVING record state (KIP-1191): the record was
// rejected or reached the delivery limit in a share group with a
// dead-letter topic, and is being copied there. It is never delivered
// again, SPSO does not move past it, and it becomes Archived once the copy
// is written or has failed for good (Partition.FinishArchiving). It is
// persisted (StateArchiving), so a new leader copies it again: the copy
// is at least once.
const Archiving RecordState = 3

// StateArchiving is Archiving in a persisted state batch.
const StateArchiving int8 = 3

// DLQCause is why a record goes to the dead-letter topic: Kafka's
// ShareGroupDLQManager causes, whose messages become the
// __dlq.errors.message header.
type DLQCause int8

// The causes. Kafka sends a record to the dead-letter topic only when a
// member rejected it or it reached share.delivery.count.limit; records
// archived because they are not deliverable (control records, aborted
// transactions, compacted offsets) or because SPSO moved are not sent.
const (
	// CauseRejected: a member acknowledged the record with reject.
	CauseRejected DLQCause = 1
	// CauseDeliveryLimit: the record was released, or its lock passed, at
	// share.delivery.count.limit deliveries.
	CauseDeliveryLimit DLQCause = 2
	// CauseRestored: the record was Archiving in the persisted state a
	// share partition was loaded from (a new leader); the cause was not
	// persisted.
	CauseRestored DLQCause = 3
)

// Message is the cause's __dlq.errors.message (Kafka's
// ShareGroupDLQManager.CLIENT_REJECT and DELIVERY_COUNT_EXCEEDED); "" for
// CauseRestored, whose record then carries no message header.
func (c DLQCause) Message() string {
	switch c {
	case CauseRejected:
		return "Offset rejected by client."
	case CauseDeliveryLimit:
		return "Offset delivery count exceeded the threshold."
	}
	return ""
}

// DeadLetter is a run of offsets of one share partition, with one delivery
// count and cause, to copy to the group's dead-letter topic (Kafka's
// ShareGroupDLQRecordParameter).
type DeadLetter struct {
	// Partition is the share partition the records are Archiving in; the
	// writer calls its FinishArchiving when done.
	Partition *Partition
	// Key names the share partition.
	Key Key
	// First and Last bound the run, inclusive.
	First, Last int64
	// DeliveryCount is the records' delivery count.
	DeliveryCount int16
	// Cause is why they are dead-lettered.
	Cause DLQCause
}

// DeadLetterSink takes the records to dead-letter: the share partitions
// hand it each run once its Archiving state is durable (the write that
// carried it succeeded, or the window was loaded with it), under the
// partition's lock.
type DeadLetterSink interface {
	// Enqueue queues dl without blocking. false means it was not taken
	// (the queue is full): the records are archived without a copy.
	Enqueue(dl DeadLetter) bool
}

// archive archives r for cause: Archiving, to be handed to the dead-letter
// sink at the next flushDeadLetters, when the partition has one; Archived
// otherwise.
func (sp *Partition) archive(r *rec, cause DLQCause) {
	r.member, r.deadline = "", time.Time{}
	if sp.cfg.DeadLetters == nil {
		r.state = Archived
		return
	}
	r.state, r.dlq = Archiving, cause
	sp.dlqPending = true
}

// flushDeadLetters hands the Archiving records not yet handed over to the
// sink whose Archiving state is durable (neither pending nor unsynced,
// write.go), in runs of one delivery count and cause. A run the sink does
// not take (or every run, without a sink: the group's dead-letter topic
// was unset) is archived at once.
func (sp *Partition) flushDeadLetters() {
	if !sp.dlqPending {
		return
	}
	sp.dlqPending = false
	sink := sp.cfg.DeadLetters
	due := func(r rec) bool { return r.state == Archiving && r.dlq != 0 && !r.pending && !r.unsynced }
	for i := 0; i < len(sp.recs); {
		r := sp.recs[i]
		if !due(r) {
			if r.state == Archiving && r.dlq != 0 {
				sp.dlqPending = true // not durable yet: a later flush
			}
			i++
			continue
		}
		j := i + 1
		for j < len(sp.recs) && due(sp.recs[j]) && sp.recs[j].dlq == r.dlq && sp.recs[j].count == r.count {
			j++
		}
		dl := DeadLetter{Partition: sp, Key: sp.key, First: sp.start + int64(i), Last: sp.start + int64(j) - 1, DeliveryCount: r.count, Cause: r.dlq}
		taken := sink != nil && sink.Enqueue(dl)
		for k := i; k < j; k++ {
			sp.recs[k].dlq = 0
			if !taken {
				sp.recs[k].state = Archived
			}
		}
		i = j
	}
	sp.advance()
}

// FinishArchiving archives the offsets first..last that are Archiving: the
// dead-letter writer wrote their copy or gave up on it (Kafka's
// SharePartition moves ARCHIVING to ARCHIVED either way). SPSO moves past
// them and the window is persisted by the partition's next write
// (write.go); the error is the persister's (the state in memory is kept:
// a later write carries it).
func (sp *Partition) FinishArchiving(ctx context.Context, first, last int64) error {
	sp.mu.Lock()
	changed := false
	for o := max(first, sp.start); o <= last && o < sp.end(); o++ {
		if r := &sp.recs[o-sp.start]; r.state == Archiving && r.dlq == 0 {
			r.state = Archived
			changed = true
		}
	}
	if !changed {
		sp.mu.Unlock()
		return nil
	}
	sp.advance()
	sp.released()
	p := &Pending{sp: sp, w: sp.pend()}
	sp.mu.Unlock()
	return p.Wait(ctx)
}

// restoreDeadLetters marks the Archiving records of a window just loaded
// to be handed to the sink again (CauseRestored).
func (sp *Partition) restoreDeadLetters() {
	for i := range sp.recs {
		if sp.recs[i].state == Archiving {
			sp.recs[i].dlq = CauseRestored
			sp.dlqPending = true
		}
	}
	sp.flushDeadLetters()
}
