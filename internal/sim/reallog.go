package sim

import (
	"slices"
	"time"

	sbroker "github.com/sluice-io/sluice/internal/broker"
)

// The log-start and acks=1 parts of the real-broker world's workload.

// realDeleteTopic is the topic DeleteRecords trims (KIP-107); the
// transactions write the others, whose final read_committed check needs
// every committed value still in the log.
const realDeleteTopic = "d0"

// pendingDelete is a DeleteRecords waiting for its answer.
type pendingDelete struct {
	broker int32
	topic  string
	off    int64
	ch     <-chan sbroker.DeleteResult
}

// deleteRecords sends a DeleteRecords of realDeleteTopic to its leader
// (Partition.DeleteRecords, handler 21) for a random offset up to the HW.
// Records below it may be gone from then on; once it is answered, every
// replica must start at or above it for good (checked after settling).
func (w *realWorld) deleteRecords() {
	topic := realDeleteTopic
	leader := w.ctrl.image().Topics[topic].Partitions[0].Leader
	if leader < 1 || !w.brokers[leader-1].up {
		return
	}
	p, err := w.brokers[leader-1].b.LeaderBy(topic, 0, time.Time{})
	if err != nil {
		return
	}
	start, hw := p.LogStartOffset(), p.HighWatermark()
	if hw <= start {
		return
	}
	off := start + 1 + w.rng.Int64N(hw-start)
	w.deleted[topic] = max(w.deleted[topic], off)
	w.tracef("DeleteRecords %s-0 to %d on %d (HW %d)", topic, off, leader, hw)
	w.deletes = append(w.deletes, pendingDelete{broker: leader, topic: topic, off: off,
		ch: p.DeleteRecords(off, w.clk.Now().Add(realProduceDeadline))})
}

// collectDeletes takes the DeleteRecords answers that arrived.
func (w *realWorld) collectDeletes() {
	kept := w.deletes[:0]
	for _, d := range w.deletes {
		select {
		case res := <-d.ch:
			w.tracef("DeleteRecords %s-0 to %d on %d: low watermark %d, %v", d.topic, d.off, d.broker, res.LowWatermark, res.Err)
			if res.Err == nil {
				w.stats.Deletes++
				w.deleteAcked[d.topic] = max(w.deleteAcked[d.topic], d.off)
			}
		default:
			kept = append(kept, d)
		}
	}
	w.deletes = kept
}

// stopDeletes drops the DeleteRecords a stopped broker will not answer.
func (w *realWorld) stopDeletes(id int32) {
	w.deletes = slices.DeleteFunc(w.deletes, func(d pendingDelete) bool { return d.broker == id })
}

// retention runs one retention pass on rb (retention.ms on
// realDeleteTopic): records below the log start it leaves may be gone
// from then on, as after a DeleteRecords.
func (w *realWorld) retention(rb *realBroker) {
	rb.b.StepRetention()
	p, err := rb.b.PartitionBy(realDeleteTopic, 0, time.Time{})
	if err != nil {
		return
	}
	if ls := p.LogStartOffset(); ls > w.deleted[realDeleteTopic] {
		w.tracef("retention on %d: %s-0 starts at %d", rb.id, realDeleteTopic, ls)
		w.deleted[realDeleteTopic] = ls
		w.stats.Retained++
	}
}

// ackedOne checks an acks=1 acknowledgement: the leader answers only once
// the record is flushed on its own disk (docs/architecture.md,
// "Durability"), so at the answer its log holds the record at that offset,
// synced. (A later leader may lose it: acks=1 promises no more.)
func (w *realWorld) ackedOne(pp pendingProduce, off int64) {
	w.stats.AckedOne++
	rb := w.brokers[pp.broker-1]
	if !rb.up {
		return
	}
	p, err := rb.b.PartitionBy(pp.topic, 0, time.Time{})
	if err != nil {
		w.fail("acks=1 %q acknowledged by %d at %s-0@%d: %v", pp.value, pp.broker, pp.topic, off, err)
		return
	}
	l := p.Log()
	if flushed := l.FlushedOffset(); flushed <= off {
		w.fail("acks=1 %q acknowledged by %d at %s-0@%d, flushed only below %d", pp.value, pp.broker, pp.topic, off, flushed)
		return
	}
	if off < l.LocalLogStartOffset() {
		return
	}
	var got string
	found := false
	if err := readRecords(l, off+1, func(o int64, value []byte) bool {
		if o == off {
			got, found = string(value), true
			return false
		}
		return true
	}); err != nil {
		w.fail("reading %s-0 on %d: %v", pp.topic, pp.broker, err)
		return
	}
	if !found || got != pp.value {
		w.fail("acks=1 %q acknowledged by %d at %s-0@%d, which holds %q (present %v)", pp.value, pp.broker, pp.topic, off, got, found)
		return
	}
	w.tracef("acked (acks=1) %s at %s-0@%d by %d", pp.value, pp.topic, off, pp.broker)
}
