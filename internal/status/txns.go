package status

import (
	"sort"

	"github.com/sluice-io/sluice/internal/txn"
)

// Transaction is one open transaction as its coordinator holds it: a
// transactional id in Ongoing, PrepareCommit, PrepareAbort or
// PrepareEpochFence (Kafka's TransactionState names, as
// kafka-transactions.sh list shows them).
type Transaction struct {
	TransactionalID string `json:"transactionalId"`
	ProducerID      int64  `json:"producerId"`
	ProducerEpoch   int16  `json:"producerEpoch"`
	State           string `json:"state"`
	// Partitions are the transaction's partitions, as "topic/partition".
	Partitions []string `json:"partitions"`
	// StartedMs is when the transaction began (Unix ms, the
	// coordinator's clock); TimeoutMs is its transaction.timeout.ms.
	StartedMs int64 `json:"startedMs"`
	TimeoutMs int64 `json:"timeoutMs"`
}

// openStates are the states the console lists.
var openStates = map[txn.State]bool{txn.Ongoing: true, txn.PrepareCommit: true, txn.PrepareAbort: true, txn.PrepareEpochFence: true}

// OpenTransactions lists the open transactions c coordinates on this node,
// ordered by transactional id; nil c lists none.
func OpenTransactions(c *txn.Coordinator) []Transaction {
	if c == nil {
		return nil
	}
	ms, _ := c.List(txn.ListFilter{States: openStates, MinDuration: -1})
	out := make([]Transaction, 0, len(ms))
	for _, m := range ms {
		t := Transaction{TransactionalID: m.ID, ProducerID: m.ProducerID, ProducerEpoch: m.Epoch, State: m.State.String(),
			Partitions: make([]string, 0, len(m.Partitions)), TimeoutMs: m.Timeout.Milliseconds()}
		if !m.Start.IsZero() {
			t.StartedMs = m.Start.UnixMilli()
		}
		for p := range m.Partitions {
			t.Partitions = append(t.Partitions, tpKey(p.Topic, p.Partition))
		}
		sort.Strings(t.Partitions)
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}

// TransactionView is one open transaction in the cluster view: what its
// coordinator reports, with the coordinator's id and the transaction's
// age at the view's time.
type TransactionView struct {
	Transaction
	Coordinator int32 `json:"coordinator"`
	// DurationMs is how long it has been open (0 if its start is unknown).
	DurationMs int64 `json:"durationMs"`
}

// mergeTransactions joins the open transactions every coordinator reached
// reports. An id reported by two nodes (during a coordinator move) is
// taken from the lower node id.
func mergeTransactions(peers map[int32]peer) []TransactionView {
	out := []TransactionView{}
	seen := map[string]bool{}
	for _, id := range sortedIDs(peers) {
		pv := peers[id].view
		if pv == nil {
			continue
		}
		for _, t := range pv.Transactions {
			if seen[t.TransactionalID] {
				continue
			}
			seen[t.TransactionalID] = true
			tv := TransactionView{Transaction: t, Coordinator: id}
			if t.StartedMs > 0 {
				tv.DurationMs = max(pv.NowMs-t.StartedMs, 0)
			}
			out = append(out, tv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}
