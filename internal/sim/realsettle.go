package sim

import (
	"time"
)

// The real-broker world's settle phase: every fault healed, the cluster
// run until it converges, then every replica checked.

// converged reports a quiet cluster: no request or transaction in flight,
// every broker up and registered, every partition with its whole replica
// set in the ISR and every replica at the leader's HW and log end.
func (w *realWorld) converged() bool {
	if len(w.pending) > 0 || len(w.txnPending) > 0 || len(w.deletes) > 0 || !w.txnQuiet() {
		return false
	}
	for _, rb := range w.brokers {
		if !rb.up || rb.pendingReg != nil {
			return false
		}
	}
	im := w.ctrl.image()
	for _, topic := range w.topics {
		part := im.Topics[topic].Partitions[0]
		if len(part.ISR) != realBrokers || part.Leader < 1 {
			return false
		}
		lp, err := w.brokers[part.Leader-1].b.PartitionBy(topic, 0, time.Time{})
		if err != nil || !lp.IsLeader() {
			return false
		}
		for _, rb := range w.brokers {
			p, err := rb.b.PartitionBy(topic, 0, time.Time{})
			if err != nil || p.HighWatermark() != lp.HighWatermark() || p.LogEndOffset() != lp.LogEndOffset() || p.LeaderEpoch() != lp.LeaderEpoch() {
				return false
			}
		}
	}
	return true
}

// healthyRound is 5 ms of a healthy cluster: the clock advances, then
// every up broker runs its fetch, flush, ISR and tick loops once and, if
// extra is set, extra.
func (w *realWorld) healthyRound(extra func(*realBroker)) {
	w.clk.Advance(5 * time.Millisecond)
	for _, rb := range w.upBrokers() {
		rb.b.StepFetch()
		rb.b.StepFlush()
		rb.b.StepAlter()
		rb.b.StepTick()
		if extra != nil {
			extra(rb)
		}
	}
}

// settle heals every fault, restarts every broker and runs without faults
// until the cluster converges, then checks every replica.
func (w *realWorld) settle() {
	w.tracef("settle: heal all, restart all")
	w.cut = map[[2]int32]bool{}
	w.cutFromController = map[int32]bool{}
	w.ctrl.downUntil = time.Time{}
	for _, rb := range w.brokers {
		if !rb.up {
			w.startBroker(rb)
		}
	}
	w.settling = true
	for i := 0; i < realSettleSteps && w.failed == ""; i++ {
		// A healthy cluster: every broker runs every loop each 5 ms, no
		// message is lost; the workload stops after realSettleWork rounds.
		for _, rb := range w.brokers {
			if !rb.up { // a controlled shutdown asked for before settling
				w.startBroker(rb)
			}
		}
		w.control(0)
		var remote func(*realBroker)
		if w.tier.on {
			remote = w.remoteStep
		}
		w.healthyRound(remote)
		w.storeFaults()
		if i < realSettleWork && i%3 == 0 {
			w.produce()
		}
		if i < realSettleWork && i%20 == 0 {
			w.deleteRecords()
		}
		if i%50 == 25 {
			for _, rb := range w.upBrokers() {
				w.retention(rb)
			}
		}
		if i%50 == 40 {
			for _, rb := range w.upBrokers() {
				w.clean(rb)
			}
		}
		w.txnStep(i < realSettleWork)
		w.shareStep(false)
		w.classicStep(false)
		w.collect()
		w.collectTxn()
		w.collectDeletes()
		w.checkHW()
		if i >= realSettleWork+100 && i%25 == 0 && w.converged() {
			break
		}
	}
	if w.failed != "" {
		return
	}
	for _, rb := range w.brokers {
		rb.b.StepFlush()
	}
	w.checkCompactedAll() // learn every replica's log before checking each
	w.checkAcked()
	w.checkTxnsSettled()
	for _, topic := range w.topics {
		part := w.ctrl.image().Topics[topic].Partitions[0]
		if len(part.ISR) != realBrokers {
			w.fail("after settling, %s-0 has ISR %v; %s", topic, part.ISR, w.describe(topic))
			return
		}
		lp, err := w.brokers[part.Leader-1].b.PartitionBy(topic, 0, time.Time{})
		if err != nil {
			w.fail("leader %d of %s-0: %v", part.Leader, topic, err)
			return
		}
		hw := lp.HighWatermark()
		if topic == realTieredTopic {
			w.settleTiered()
			continue
		}
		final := map[int64]string{}
		if err := readRecords(lp.Log(), hw, func(off int64, value []byte) bool {
			final[off] = string(value)
			return true
		}); err != nil {
			w.fail("reading %s-0 on its leader: %v", topic, err)
			return
		}
		for off, v := range w.consumed[topic] {
			// A compacted log may have removed it (checkCompacted says
			// whether it might).
			if got, ok := final[off]; (!ok && off >= w.deleted[topic] && topic != realCompactTopic) || (ok && got != v) {
				w.fail("a consumer read %q at %s-0@%d, the committed log holds %q (present %v)", v, topic, off, got, ok)
				return
			}
		}
		for _, rb := range w.brokers {
			p, err := rb.b.PartitionBy(topic, 0, time.Time{})
			if err != nil {
				w.fail("broker %d: %s-0: %v", rb.id, topic, err)
				return
			}
			if topic == realCompactTopic {
				w.checkCompacted(rb.id, p)
			} else {
				w.checkLog(rb.id, topic, p.Log(), hw)
			}
			if ls := p.LogStartOffset(); ls < w.deleteAcked[topic] {
				w.fail("after settling, broker %d's %s-0 starts at %d, below the answered DeleteRecords to %d (its leader's starts at %d)",
					rb.id, topic, ls, w.deleteAcked[topic], lp.LogStartOffset())
				return
			}
		}
	}
}
