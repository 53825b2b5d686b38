package sim

import (
	sbroker "github.com/sluice-io/sluice/internal/broker"
)

// The stable prefix a read_committed consumer was shown stays stable,
// across leader changes.
//
// A read_committed Fetch answers with the partition's last stable offset,
// and the consumer takes every transaction below it as decided: it
// returns the committed ones' records and drops the aborted ones' for
// good. A transaction whose marker is written but not yet below the HW is
// still unstable (Kafka's ProducerStateManager.firstUnstableOffset counts
// the "unreplicated transactions"): a new leader may not have the marker
// and reopens the transaction. Had the LSO passed it, the consumer would
// have been shown a transaction a later leader holds open, with its
// outcome left to a marker still to be written.
//
// checkStableShown fails when a leader holds a transaction open that
// began below the highest LSO a read_committed Fetch of that partition
// answered with. (A new leader's HW, and so its LSO, may lag the old
// one's for a while: that is no violation, as the transactions below the
// old LSO stay decided; an open one below it is.)

// noteStableShown records the LSO of a read_committed Fetch answer.
func (w *realWorld) noteStableShown(topic string, lso int64) {
	tx := w.txn
	if tx.stableShown == nil {
		tx.stableShown = map[string]int64{}
	}
	tx.stableShown[topic] = max(tx.stableShown[topic], lso)
}

// checkStableShown: leader rb holds no transaction of topic open that
// began below the LSO a read_committed consumer was shown.
func (w *realWorld) checkStableShown(rb *realBroker, topic string, p *sbroker.Partition) {
	shown, ok := w.txn.stableShown[topic]
	if !ok || p.LastStableOffset() >= shown {
		return // the LSO is at most the first offset of any open transaction
	}
	for pid, first := range p.OpenTransactions() {
		if first < shown {
			w.fail("broker %d leads %s-0 (epoch %d) with producer %d's transaction from %d open, below the LSO %d a read_committed consumer was shown",
				rb.id, topic, p.LeaderEpoch(), pid, first, shown)
			return
		}
	}
}
