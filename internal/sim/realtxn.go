package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/storage"
)

// Transactions in the real-broker world. The simulator plays one
// transactional producer and its transaction coordinator: each
// transaction writes a transactional batch to one or both topics through
// their leaders, then the coordinator decides (commit only if every batch
// was acknowledged, as a producer aborts after an error) and writes the
// markers with Partition.WriteMarker to each partition's current leader,
// retrying until one acknowledges, through crashes, cut links, lost
// answers and leader changes. Sometimes the coordinator fails over: its
// epoch goes up and it sends every marker of the decided transaction
// again (Kafka's new coordinator rolls a PrepareCommit/PrepareAbort
// forward); sometimes a marker of the old coordinator epoch arrives late
// and must be refused. After a transaction that saw an error the producer
// bumps its epoch.
//
// Invariants: a read_committed consumer (Fetch with ReadCommitted, then the
// aborted-transaction filtering a Kafka client does) never returns a
// record of an aborted or undecided transaction; a leader's last stable
// offset never goes back within its epoch; no leader holds a transaction
// open below an LSO a read_committed consumer was shown (reallso.go); a
// stale coordinator's marker is never accepted; after settling no
// transaction is open (LSO = HW) and a read_committed read of each
// partition holds exactly the committed transactions' records (no torn or
// lost transaction).

const realTxnPID = 3000

type txnPhase int8

const (
	txnIdle txnPhase = iota
	txnProducing
	txnMarking
)

// simTxn is the transactional producer and its coordinator's state.
type simTxn struct {
	n          int // current transaction number
	epoch      int16
	coordEpoch int32
	seq        map[string]int32 // next sequence per topic
	phase      txnPhase
	values     map[string]string // topic → the value written there
	// openChecks counts checkOpenTxns calls on changed logs, and
	// openChecked holds the log end and truncation generation each log
	// had at its last compare.
	openChecks  int
	openChecked map[string][2]int64
	inflight    int  // produces not answered yet
	doubtful    bool // a produce failed or went unanswered
	commit      bool
	todo        map[string]bool // topics whose marker is not acknowledged
	sent        map[string]bool // topics with a marker in flight
	// decided maps every decided transaction's values to its outcome.
	decided map[string]bool
	// tv2: transaction version 2 (even seeds): the epoch goes up at every
	// end and the markers carry the bumped one (KIP-890 part 2). late is
	// the previous transaction's marker, sent once more while the next
	// transaction writes (a request held somewhere and delivered late):
	// the partition must refuse it, or the checks find what it ended.
	tv2  bool
	late *lateMarker
	// stableShown is the highest LSO a read_committed Fetch answered
	// with, per topic (reallso.go).
	stableShown map[string]int64
}

// lateMarker is a transaction's marker, to be delivered late.
type lateMarker struct {
	n          int
	topics     []string
	commit     bool
	epoch      int16
	coordEpoch int32
}

// markerEpoch is the producer epoch the current transaction's markers
// carry.
func (tx *simTxn) markerEpoch() int16 {
	if tx.tv2 {
		return tx.epoch + 1
	}
	return tx.epoch
}

type pendingTxn struct {
	broker int32
	topic  string
	marker bool
	stale  bool  // a marker of an older coordinator epoch
	late   bool  // a marker of the previous transaction, delivered late
	epoch  int32 // the marker's coordinator epoch
	n      int   // the transaction it belongs to
	ch     <-chan replica.ProduceResult
}

func newSimTxn() *simTxn {
	return &simTxn{coordEpoch: 1, seq: map[string]int32{}, decided: map[string]bool{}}
}

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

// txnStep moves the transaction workload one step; start says whether a
// new transaction may begin.
func (w *realWorld) txnStep(start bool) {
	tx := w.txn
	switch tx.phase {
	case txnIdle:
		if !start {
			return
		}
		tx.n++
		tx.phase, tx.values, tx.doubtful, tx.inflight = txnProducing, map[string]string{}, false, 0
		for _, topic := range w.txnTopics {
			if len(tx.values) > 0 && w.chance(0.3) {
				continue
			}
			value := fmt.Sprintf("x%d-%s", tx.n, topic)
			tx.values[topic] = value
			leader, p := w.txnLeader(topic)
			if p == nil {
				tx.doubtful = true // the producer cannot send it: it aborts
				continue
			}
			data := batchtest.Build(batchtest.Options{Transactional: true, ProducerID: realTxnPID, ProducerEpoch: tx.epoch,
				BaseSequence: tx.seq[topic], BaseTimestamp: w.clk.Now().UnixMilli()}, batchtest.Values(value))
			tx.seq[topic]++
			h, _ := batch.ParseHeader(data)
			tx.inflight++
			w.txnPending = append(w.txnPending, pendingTxn{broker: leader, topic: topic, n: tx.n,
				ch: p.Produce(data, h, -1, w.clk.Now().Add(realProduceDeadline))})
		}
		w.tracef("txn %d (epoch %d) writes %v", tx.n, tx.epoch, tx.values)
		w.maybeLateMarker()
	case txnProducing:
		w.maybeLateMarker()
		if tx.inflight > 0 {
			return
		}
		// The decision, durable at the coordinator (PrepareCommit or
		// PrepareAbort) before any marker is sent.
		tx.commit = !tx.doubtful && w.chance(0.7)
		for _, v := range tx.values {
			tx.decided[v] = tx.commit
		}
		tx.phase, tx.todo, tx.sent = txnMarking, map[string]bool{}, map[string]bool{}
		for topic := range tx.values {
			tx.todo[topic] = true
		}
		w.tracef("txn %d decided: commit=%v", tx.n, tx.commit)
	case txnMarking:
		if !w.settling && w.chance(0.02) {
			// Coordinator failover: the new one sends every marker again.
			tx.coordEpoch++
			for topic := range tx.values {
				tx.todo[topic] = true
			}
			clear(tx.sent)
			w.stats.TxnFailovers++
			w.tracef("txn coordinator fails over, epoch %d", tx.coordEpoch)
		}
		for _, topic := range sortedKeys(tx.todo) {
			if tx.sent[topic] || (!w.settling && w.chance(0.3)) {
				continue // in flight, or the request is lost on the way
			}
			w.sendMarker(topic, tx.coordEpoch, false)
		}
		if len(tx.todo) == 0 {
			w.tracef("txn %d complete (commit=%v)", tx.n, tx.commit)
			if tx.commit {
				w.stats.TxnCommitted++
			} else {
				w.stats.TxnAborted++
			}
			if tx.tv2 {
				tx.late = &lateMarker{n: tx.n, topics: sortedKeys(tx.todoAll()), commit: tx.commit, epoch: tx.markerEpoch(), coordEpoch: tx.coordEpoch}
			}
			if tx.doubtful || tx.tv2 {
				// A producer that saw an error starts over with a bumped
				// epoch (KIP-360), and transaction version 2 bumps it at
				// every end: sequences restart at 0.
				tx.epoch++
				clear(tx.seq)
			}
			tx.phase = txnIdle
			if !w.settling && tx.coordEpoch > 1 && w.chance(0.5) {
				// A marker from the previous coordinator arrives late.
				topic := w.txnTopics[w.rng.IntN(len(w.txnTopics))]
				if _, ok := tx.values[topic]; ok {
					w.sendMarker(topic, tx.coordEpoch-1, true)
				}
			}
		}
	}
}

// maybeLateMarker delivers the previous transaction's marker once more,
// now that the next one writes (transaction version 2).
func (w *realWorld) maybeLateMarker() {
	tx := w.txn
	l := tx.late
	if l == nil || !w.chance(0.5) {
		return
	}
	tx.late = nil
	topic := l.topics[w.rng.IntN(len(l.topics))]
	leader, p := w.txnLeader(topic)
	if p == nil {
		return
	}
	data := batch.EncodeMarker(realTxnPID, l.epoch, batch.Marker{Commit: l.commit, CoordinatorEpoch: l.coordEpoch}, w.clk.Now().UnixMilli())
	w.stats.TxnLateMarkers++
	w.tracef("txn %d's marker (epoch %d) delivered late to %s-0 on %d", l.n, l.epoch, topic, leader)
	w.txnPending = append(w.txnPending, pendingTxn{broker: leader, topic: topic, marker: true, late: true, n: l.n,
		ch: p.WriteMarker(data, w.clk.Now().Add(realProduceDeadline), true)})
}

// sendMarker writes the current transaction's marker to topic's leader.
func (w *realWorld) sendMarker(topic string, coordEpoch int32, stale bool) {
	tx := w.txn
	leader, p := w.txnLeader(topic)
	if p == nil {
		return
	}
	data := batch.EncodeMarker(realTxnPID, tx.markerEpoch(), batch.Marker{Commit: tx.commit, CoordinatorEpoch: coordEpoch}, w.clk.Now().UnixMilli())
	if !stale {
		tx.sent[topic] = true
	}
	w.tracef("txn %d marker commit=%v coordinator epoch %d to %s-0 on %d", tx.n, tx.commit, coordEpoch, topic, leader)
	w.txnPending = append(w.txnPending, pendingTxn{broker: leader, topic: topic, marker: true, stale: stale, epoch: coordEpoch, n: tx.n,
		ch: p.WriteMarker(data, w.clk.Now().Add(realProduceDeadline), tx.tv2)})
}

// txnDone applies an answer to a transactional produce or marker; code -1
// is an answer lost with its broker.
func (w *realWorld) txnDone(pt pendingTxn, code int16) {
	tx := w.txn
	switch {
	case pt.late:
		// Refused, or harmless where the next transaction had nothing
		// open yet: the read checks decide.
	case pt.stale:
		if code == 0 {
			w.fail("a marker of stale coordinator epoch %d was accepted on %s-0", tx.coordEpoch-1, pt.topic)
		}
	case pt.marker:
		if pt.n != tx.n || tx.phase != txnMarking {
			return
		}
		if pt.epoch != tx.coordEpoch {
			return // the previous coordinator's: the current one sends its own
		}
		delete(tx.sent, pt.topic)
		switch code {
		case 0:
			delete(tx.todo, pt.topic)
		case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
			w.fail("txn %d: the marker to %s-0 was refused: %v", tx.n, pt.topic, kerr.ErrorForCode(code))
		}
	default:
		tx.inflight--
		if code != 0 {
			tx.doubtful = true
		}
	}
}

// collectTxn takes the transactional answers that arrived.
func (w *realWorld) collectTxn() {
	kept := w.txnPending[:0]
	for _, pt := range w.txnPending {
		select {
		case res := <-pt.ch:
			w.txnDone(pt, res.Error)
		default:
			kept = append(kept, pt)
		}
	}
	w.txnPending = kept
}

// crashTxn drops the transactional requests a crashed broker will never
// answer.
func (w *realWorld) crashTxn(id int32) {
	kept := w.txnPending[:0]
	var lost []pendingTxn
	for _, pt := range w.txnPending {
		if pt.broker == id {
			lost = append(lost, pt)
		} else {
			kept = append(kept, pt)
		}
	}
	w.txnPending = kept
	for _, pt := range lost {
		w.txnDone(pt, -1)
	}
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
// that was not committed.
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
	if w.txn.phase != txnIdle {
		w.fail("after settling, transaction %d is still in phase %d", w.txn.n, w.txn.phase)
		return
	}
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
		for v, committed := range w.txn.decided {
			if committed && strings.HasSuffix(v, "-"+topic) && !seen[v] {
				w.fail("committed %q is missing from a read_committed read of %s-0 (a torn or lost transaction)", v, topic)
				return
			}
		}
	}
}

// todoAll is the set of topics the current transaction wrote to.
func (tx *simTxn) todoAll() map[string]bool {
	out := map[string]bool{}
	for t := range tx.values {
		out[t] = true
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
