package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/storage"
)

// Transactions in the real-broker world. One transactional producer
// (realcoord.go) goes through the real transaction coordinator
// (internal/txn, stepped) of the brokers: InitProducerId, then for each
// transaction AddPartitionsToTxn, a transactional batch to one or both
// topics through their leaders, and EndTxn (commit only if every batch was
// acknowledged, as a producer aborts after an error); the coordinator
// writes the markers to each partition's leader, through crashes, cut
// links, lost, delayed and late requests and leader changes, and fails
// over with the leadership of __transaction_state.
//
// Invariants: a read_committed consumer (Fetch with ReadCommitted, then the
// aborted-transaction filtering a Kafka client does) never returns a
// record of a transaction the producer did not ask to commit; a leader's
// last stable offset never goes back within its epoch; no leader holds a
// transaction open below an LSO a read_committed consumer was shown
// (reallso.go); after settling no transaction is open (LSO = HW), and a
// read_committed read of each partition holds every transaction whose
// commit was acknowledged, holds a transaction whose commit was asked but
// not answered whole or not at all, and holds each record once (no torn
// or lost transaction).

// txnLeader returns topic's leader partition as the image names it, if
// that broker is up and leads it.
func (w *realWorld) txnLeader(topic string) (int32, *sbroker.Partition) {
	leader := w.ctrl.image().Topics[topic].Partitions[0].Leader
	if leader < 1 || !w.brokers[leader-1].up {
		return -1, nil
	}
	p, err := w.brokers[leader-1].b.LeaderBy(topic, 0, time.Time{})
	if err != nil {
		return -1, nil
	}
	return leader, p
}

// committedFilter returns the records of batches b (a fetch response's
// records from offset from) a read_committed Kafka consumer returns,
// given the aborted transactions of the range (the client's
// abortedProducerIds logic): a transactional batch of a producer whose
// aborted transaction began at or before it is skipped until that
// producer's ABORT marker; control batches are never returned.
func committedFilter(b []byte, aborted []storage.AbortedTxn, fn func(off int64, value []byte)) error {
	slices.SortFunc(aborted, func(x, y storage.AbortedTxn) int { return int(x.FirstOffset - y.FirstOffset) })
	skipping := map[int64]bool{}
	for len(b) > 0 {
		h, one, rest, err := batch.Next(b)
		if err != nil {
			return err
		}
		b = rest
		for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
			skipping[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if h.IsControl() {
			if m, err := batch.ParseMarker(one); err == nil && !m.Commit {
				delete(skipping, h.ProducerID)
			}
			continue
		}
		if h.IsTransactional() && skipping[h.ProducerID] {
			continue
		}
		if err := batch.Records(one, func(r batch.Record) bool {
			fn(h.BaseOffset+int64(r.OffsetDelta), recordValue(r))
			return true
		}); err != nil {
			return err
		}
	}
	return nil
}

// checkCommittedRead fails on a read_committed record of a transaction
// the producer did not ask to commit.
func (w *realWorld) checkCommittedRead(where, value string) {
	if !strings.HasPrefix(value, "x") {
		return
	}
	committed, decided := w.txn.decided[value]
	switch {
	case !decided:
		w.fail("%s: read_committed returned %q of an undecided transaction", where, value)
	case !committed:
		w.fail("%s: read_committed returned %q of an aborted transaction", where, value)
	}
}

// checkLSO: a leader's last stable offset never goes back within its
// epoch and never passes its HW.
func (w *realWorld) checkLSO(rb *realBroker, topic string, p *sbroker.Partition) {
	lso, hw, le := p.LastStableOffset(), p.HighWatermark(), int64(p.LeaderEpoch())
	if lso > hw {
		w.fail("broker %d: LSO %d of %s-0 above its HW %d", rb.id, lso, topic, hw)
	}
	if last, ok := rb.lso[topic]; ok && last[1] == le && lso < last[0] {
		w.fail("broker %d: LSO of %s-0 went back from %d to %d in leader epoch %d", rb.id, topic, last[0], lso, le)
	}
	rb.lso[topic] = [2]int64{lso, le}
	w.checkStableShown(rb, topic, p)
}

// checkOpenTxns: the open transactions of the replica machine, the one
// owner of producer state, are those a replay of its log finds (what a
// restart, or the machine after a truncation, starts from). A replay reads
// the log from its newest snapshot, so only a log that changed since its
// last compare is compared, on one such call in seven and on every one
// while settling.
func (w *realWorld) checkOpenTxns(rb *realBroker, topic string, p *sbroker.Partition) {
	l := p.Log()
	k, now := fmt.Sprintf("%d/%s", rb.id, topic), [2]int64{l.LogEndOffset(), int64(l.Generation())}
	if w.txn.openChecked[k] == now {
		return
	}
	if w.txn.openChecks++; w.txn.openChecks%7 != 0 && !w.settling {
		return
	}
	if w.txn.openChecked == nil {
		w.txn.openChecked = map[string][2]int64{}
	}
	w.txn.openChecked[k] = now
	want, err := l.OpenTxns()
	if err != nil {
		return // a failed log: the broker halts
	}
	if got := p.OpenTransactions(); !maps.Equal(got, want) {
		w.fail("broker %d: %s-0's replica machine has open transactions %v, its log %v", rb.id, topic, got, want)
	}
}

// checkTxnsSettled: no transaction is open, and a read_committed read of
// each partition's leader holds exactly the committed transactions'
// records, each once.
func (w *realWorld) checkTxnsSettled() {
	if !w.txnQuiet() {
		w.fail("after settling, transaction %d is still in phase %d (or its markers are not all written)", w.txn.n, w.txn.phase)
		return
	}
	seenAll := map[string]bool{}
	for _, topic := range w.txnTopics {
		part := w.ctrl.image().Topics[topic].Partitions[0]
		p, err := w.brokers[part.Leader-1].b.PartitionBy(topic, 0, time.Time{})
		if err != nil {
			w.fail("leader of %s-0: %v", topic, err)
			return
		}
		if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
			w.fail("after settling, %s-0 has LSO %d below HW %d: open %v", topic, lso, hw, p.OpenTransactions())
			return
		}
		l := p.Log()
		end := p.HighWatermark()
		seen := map[string]bool{}
		for off := l.LogStartOffset(); off < end; {
			sl, err := l.Read(off, 1<<20, end)
			if err != nil {
				w.fail("reading %s-0: %v", topic, err)
				return
			}
			b, err := sl.AppendTo(nil)
			if err != nil || len(b) == 0 {
				break
			}
			err = committedFilter(b, l.AbortedTxns(off, sl.NextOffset), func(_ int64, v []byte) {
				if strings.HasPrefix(string(v), "x") {
					w.checkCommittedRead("final read of "+topic, string(v))
					if seen[string(v)] {
						w.fail("final read of %s-0 holds %q twice", topic, v)
					}
					seen[string(v)] = true
				}
			})
			if err != nil {
				w.fail("reading %s-0: %v", topic, err)
				return
			}
			off = sl.NextOffset
		}
		for v := range w.txn.acked {
			if strings.HasSuffix(v, "-"+topic) && !seen[v] {
				w.fail("committed %q is missing from a read_committed read of %s-0 (a torn or lost transaction)", v, topic)
				return
			}
		}
		maps.Copy(seenAll, seen)
	}
	// A commit asked but never answered: the whole transaction or none.
	for n, vs := range w.txn.asked {
		in := 0
		for _, v := range vs {
			if seenAll[v] {
				in++
			}
		}
		if in != 0 && in != len(vs) {
			w.fail("transaction %d is torn: a read_committed read holds %d of its records %v", n, in, vs)
			return
		}
	}
	w.checkGroupSettled()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
