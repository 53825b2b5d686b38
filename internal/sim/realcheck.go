package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/storage"
)

// The real-broker world's checks that run as it goes (docs/replication.md,
// "Invariants"); the settle phase's are in real.go, the transactions' in
// realtxn.go, compaction's in realcompact.go.

// checkHW: a leader's high watermark never goes back within its epoch,
// and no two brokers lead a partition in the same epoch.
func (w *realWorld) checkHW() {
	leaders := map[string]int32{}
	for _, rb := range w.upBrokers() {
		for _, topic := range w.topics {
			p, err := rb.b.PartitionBy(topic, 0, time.Time{})
			if err != nil || !p.IsLeader() {
				continue
			}
			k := fmt.Sprintf("%s/%d", topic, p.LeaderEpoch())
			if other, ok := leaders[k]; ok {
				w.fail("brokers %d and %d both lead %s-0 in epoch %d", other, rb.id, topic, p.LeaderEpoch())
				return
			}
			leaders[k] = rb.id
		}
	}
	for _, rb := range w.upBrokers() {
		for _, topic := range w.topics {
			p, err := rb.b.PartitionBy(topic, 0, time.Time{})
			if err == nil && topic != realDeleteTopic && topic != realCompactTopic {
				w.checkOpenTxns(rb, topic, p)
			}
			if err != nil || !p.IsLeader() {
				continue
			}
			hw, le := p.HighWatermark(), int64(p.LeaderEpoch())
			if last, ok := rb.hw[topic]; ok && last[1] == le && hw < last[0] {
				w.fail("broker %d: HW of %s-0 went back from %d to %d in leader epoch %d", rb.id, topic, last[0], hw, le)
			}
			if last, ok := rb.hw[topic]; (!ok || last[1] != le) && p.LeaderEpoch() == w.ctrl.image().Topics[topic].Partitions[0].LeaderEpoch {
				w.checkElected(rb, topic, p.Log().LogEndOffset(), p.LeaderEpoch())
			}
			rb.hw[topic] = [2]int64{hw, le}
			w.checkProposal(rb, topic, p)
			if ls := p.LogStartOffset(); ls < w.deleteAcked[topic] && p.LeaderEpoch() == w.ctrl.image().Topics[topic].Partitions[0].LeaderEpoch {
				w.fail("broker %d leads %s-0 (epoch %d) from %d, below the answered DeleteRecords to %d", rb.id, topic, le, ls, w.deleteAcked[topic])
			}
			w.checkLSO(rb, topic, p)
			w.checkDurable(rb.id, topic, hw)
		}
	}
	w.checkISRLogStart()
}

// checkISRLogStart: no replica the controller keeps in the ISR of
// realDeleteTopic on an active broker (registered, not fenced, not
// shutting down), nor any in its ELR (KIP-966), starts below an answered
// DeleteRecords: any of them may be elected next. A follower joins the
// ISR only once it reports the leader's log start, and DeleteRecords
// waits for the log start of every live replica (KIP-841: not fenced, not
// shutting down) and of every ELR member.
func (w *realWorld) checkISRLogStart() {
	topic := realDeleteTopic
	acked := w.deleteAcked[topic]
	im := w.ctrl.image()
	part := im.Topics[topic].Partitions[0]
	for _, id := range part.ISR {
		rb := w.brokers[id-1]
		if !rb.up || rb.pendingReg != nil || !im.Brokers[id].Active() {
			continue
		}
		if p, err := rb.b.PartitionBy(topic, 0, time.Time{}); err == nil && p.LogStartOffset() < acked {
			w.fail("broker %d is in the ISR %v of %s-0 (epoch %d) and starts at %d, below the answered DeleteRecords to %d",
				id, part.ISR, topic, part.LeaderEpoch, p.LogStartOffset(), acked)
			return
		}
	}
	for _, id := range part.ELR {
		rb := w.brokers[id-1]
		if !rb.up || rb.pendingReg != nil {
			continue
		}
		if p, err := rb.b.PartitionBy(topic, 0, time.Time{}); err == nil && p.LogStartOffset() < acked {
			w.fail("broker %d is in the ELR %v of %s-0 (epoch %d) and starts at %d, below the answered DeleteRecords to %d",
				id, part.ELR, topic, part.LeaderEpoch, p.LogStartOffset(), acked)
			return
		}
	}
}

// realProposalStuck is how long a leader may keep an ISR change it has
// not sent (the machine retries a failed one after 500 ms).
const realProposalStuck = 2 * time.Second

// checkProposal: a leader never sits on an ISR change without sending it
// (the machine keeps one proposal with the controller and sends the next
// once it is answered, or retries after a back-off); one held for longer
// than realProposalStuck would leave the ISR stuck.
func (w *realWorld) checkProposal(rb *realBroker, topic string, p *sbroker.Partition) {
	if !p.Status(nil).ProposalWaiting {
		delete(rb.proposalSince, topic)
		return
	}
	since, ok := rb.proposalSince[topic]
	if !ok {
		rb.proposalSince[topic] = w.clk.Now()
		return
	}
	if w.clk.Now().Sub(since) > realProposalStuck {
		w.fail("broker %d has held an ISR change of %s-0 unsent since %d ms; %s", rb.id, topic, since.Sub(w.start).Milliseconds(), w.describe(topic))
	}
}

// realMinISR is the topics' min.insync.replicas, but c0's: 1, so that its
// HW moves, and its replicas clean, under faults too.
const realMinISR = 2

// minISR is topic's min.insync.replicas.
func minISR(topic string) int {
	if topic == realCompactTopic {
		return 1
	}
	return realMinISR
}

// checkDurable is check 6 of docs/replication.md: every record below a
// leader's HW is flushed on at least min(min.insync.replicas, RF)
// replicas: on the disk of a live broker, or kept by a stopped one
// (a crash keeps what was synced); a wiped disk not yet caught up
// (realelr.go) is a copy lost to the fault, not to the protocol.
func (w *realWorld) checkDurable(leader int32, topic string, hw int64) {
	n := 0
	for _, rb := range w.brokers {
		if rb.up {
			if p, err := rb.b.PartitionBy(topic, 0, time.Time{}); err == nil {
				rb.flushed[topic] = p.Log().FlushedOffset()
			}
		}
		if rb.flushed[topic] >= hw {
			n++
		}
	}
	if n+w.wipedMissing(topic) < minISR(topic) {
		w.fail("%s-0: broker %d's HW %d is flushed on %d replicas (min.insync.replicas %d): %s", topic, leader, hw, n, minISR(topic), w.describe(topic))
	}
}

// checkAcked: the leader of each partition (up, and leading by the latest
// image) holds every acknowledged record at its offset; the compacted
// topic has its own check on every live replica (checkCompacted).
func (w *realWorld) checkAcked() {
	w.checkCompactedAll()
	w.checkELR()
	for _, topic := range w.topics {
		if topic == realCompactTopic {
			continue // checkCompactedAll
		}
		if topic == realTieredTopic {
			w.checkTiered()
			w.checkLocalCopied(true)
			continue
		}
		leader := w.ctrl.image().Topics[topic].Partitions[0].Leader
		if leader < 1 || !w.brokers[leader-1].up {
			continue
		}
		p, err := w.brokers[leader-1].b.PartitionBy(topic, 0, time.Time{})
		if err != nil || !p.IsLeader() {
			continue
		}
		w.checkLog(leader, topic, p.Log(), p.Log().LogEndOffset())
	}
}

// checkLog fails unless every acknowledged record of topic below end is in
// l at its offset.
func (w *realWorld) checkLog(id int32, topic string, l *storage.Log, end int64) {
	want := map[int64]string{}
	for _, a := range w.acked[topic] {
		want[a.off] = a.value
	}
	found := map[int64]bool{}
	seen := map[string]int64{}
	err := readRecords(l, end, func(off int64, value []byte) bool {
		if first, ok := seen[string(value)]; ok {
			w.fail("broker %d: %s-0 holds %q twice, at %d and %d", id, topic, value, first, off)
			return false
		}
		seen[string(value)] = off
		if v, ok := want[off]; ok {
			if v != string(value) {
				w.fail("broker %d: %s-0@%d holds %q, acknowledged %q", id, topic, off, value, v)
				return false
			}
			found[off] = true
		}
		return true
	})
	if err != nil {
		w.fail("broker %d: reading %s-0: %v", id, topic, err)
		return
	}
	for _, a := range w.acked[topic] {
		if !found[a.off] && a.off >= w.deleted[topic] {
			w.fail("broker %d leads %s-0 without acknowledged record %q at %d (log end %d)", id, topic, a.value, a.off, end)
			return
		}
	}
}

// describe renders each broker's registration and view of topic-0.
func (w *realWorld) describe(topic string) string {
	var b strings.Builder
	for _, rb := range w.brokers {
		br := w.ctrl.image().Brokers[rb.id]
		fmt.Fprintf(&b, "broker %d (up %v, epoch %d, fenced %v): ", rb.id, rb.up, br.Epoch, br.Fenced)
		if !rb.up {
			b.WriteString("down; ")
			continue
		}
		p, err := rb.b.PartitionBy(topic, 0, time.Time{})
		if err != nil {
			fmt.Fprintf(&b, "%v; ", err)
			continue
		}
		fmt.Fprintf(&b, "leader %d epoch %d LEO %d HW %d flushed %d; ", p.Leader(), p.LeaderEpoch(), p.LogEndOffset(),
			p.HighWatermark(), p.Log().FlushedOffset())
	}
	return b.String()
}

// readRecords calls fn with the value (recordValue) of every record of l
// below end, in order, until fn returns false.
func readRecords(l *storage.Log, end int64, fn func(off int64, value []byte) bool) error {
	return readBatchRecords(l, end, func(off int64, r batch.Record) bool { return fn(off, recordValue(r)) })
}
