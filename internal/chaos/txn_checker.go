package chaos

import (
	"fmt"
	"sort"
)

// Transaction outcomes (Txn.Outcome), in Jepsen's terms.
const (
	// TxnOK: EndTransaction(commit) succeeded; every value must be
	// visible to read_committed readers.
	TxnOK = "ok"
	// TxnFail: the transaction definitely did not commit: the client never
	// asked to commit it (it aborted on purpose or after a produce error,
	// or the commit was refused before it was sent). None of its values
	// may ever be visible, whether or not the abort itself succeeded: a
	// transaction nobody commits is aborted by the coordinator (timeout,
	// or the epoch bump of the next InitProducerId).
	TxnFail = "fail"
	// TxnInfo: the commit was sent and its result is unknown (timeout,
	// connection loss, coordinator moved, ...): the values may be visible
	// or not, but all together.
	TxnInfo = "info"
)

// Anomalies of the transactional workload, besides the queue ones that
// Check computes over the transactions' values (there G1a is the aborted
// read: a read_committed consumer returned a value of a transaction in
// the TxnFail state; lost-write and unseen apply to values of committed
// transactions).
const (
	// AnomUncommittedRead: a read_committed consumer returned a value
	// before its transaction's commit was even requested (a dirty read:
	// the last stable offset ran ahead of an open transaction).
	AnomUncommittedRead = "uncommitted-read"
	// AnomTornTxn: a committed or indeterminate transaction is partly
	// visible: some of its values were read, others are missing from a
	// complete final read (Jepsen's "lost write with the rest of its
	// transaction read").
	AnomTornTxn = "torn-txn"
	// AnomG1c: circular information flow (Adya's G1c, Jepsen's check
	// over write-read dependencies): a cycle of committed or
	// indeterminate transactions, each reading a value the previous one
	// wrote. read_committed forbids it: a transaction reads only what
	// committed before its read, and commits after it.
	AnomG1c = "G1c"
)

// TxnAnomalyNames lists the anomalies of the transactional workload in
// report order.
var TxnAnomalyNames = []string{AnomG1a, AnomG1c, AnomUncommittedRead, AnomTornTxn, AnomLostWrite, AnomInconsistentOffsets, AnomDuplicate, AnomPollSkip, AnomNonmonotonicPoll, AnomUnseen}

// TxnWrite is one record produced inside a transaction.
type TxnWrite struct {
	Value     string `json:"value"`
	Partition int32  `json:"partition"`
	// Offset is the offset the produce acknowledged, -1 if it was not
	// acknowledged.
	Offset int64  `json:"offset"`
	Err    string `json:"err,omitempty"`
}

// TxnRead is one record a transaction polled before producing.
type TxnRead struct {
	Value     string `json:"value"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Txn is one transaction of the txn workload and its outcome.
type Txn struct {
	Producer int `json:"producer"`
	// ID names the transaction in the history ("t<producer>-<n>"); its
	// values are "<ID>-<i>".
	ID string `json:"id"`
	// TxnID is the producer's transactional.id.
	TxnID string `json:"txnId"`
	// Reads are what the transaction polled from its producer's
	// read_committed consumer before producing.
	Reads  []TxnRead  `json:"reads,omitempty"`
	Writes []TxnWrite `json:"writes"`
	// Intent is what the workload chose before producing: "commit" or
	// "abort".
	Intent string `json:"intent"`
	// Outcome is TxnOK, TxnFail or TxnInfo.
	Outcome string `json:"outcome"`
	Err     string `json:"err,omitempty"`
	// StartMs, CommitMs and EndMs are milliseconds since the workload
	// started: BeginTransaction, the call of EndTransaction(commit) (0 if
	// commit was never asked), the end of the transaction.
	StartMs  float64 `json:"startMs"`
	CommitMs float64 `json:"commitMs,omitempty"`
	EndMs    float64 `json:"endMs"`
}

// TxnStats counts the transactions of a run.
type TxnStats struct {
	Txns      int `json:"txns"`
	Committed int `json:"committed"`
	// Aborted counts TxnFail transactions: AbortIntended of them chosen
	// to abort, the others aborted after a produce error.
	Aborted       int `json:"aborted"`
	AbortIntended int `json:"abortIntended"`
	Info          int `json:"info"`
	Values        int `json:"values"`
	// Reads counts the values transactions polled; ReadDeps the
	// write-read dependencies among them (a transaction that is not
	// TxnFail reading a value of another such one), the edges of the G1c
	// search.
	Reads    int `json:"reads"`
	ReadDeps int `json:"readDeps"`
}

func txnStats(txns []Txn) TxnStats {
	var s TxnStats
	byVal := map[string]*Txn{}
	for i := range txns {
		for _, w := range txns[i].Writes {
			byVal[w.Value] = &txns[i]
		}
	}
	for i, t := range txns {
		s.Txns++
		s.Values += len(t.Writes)
		s.Reads += len(t.Reads)
		for _, r := range t.Reads {
			if w := byVal[r.Value]; t.Outcome != TxnFail && w != nil && w != &txns[i] && w.Outcome != TxnFail {
				s.ReadDeps++
			}
		}
		switch t.Outcome {
		case TxnOK:
			s.Committed++
		case TxnFail:
			s.Aborted++
			if t.Intent == "abort" {
				s.AbortIntended++
			}
		default:
			s.Info++
		}
	}
	return s
}

// txnSends flattens transactions into per-value sends for Check: values
// of committed transactions are acknowledged sends, values of TxnFail
// transactions definite failures (so reading one is G1a), the others
// indeterminate.
func txnSends(txns []Txn) []Send {
	var out []Send
	for _, t := range txns {
		for _, w := range t.Writes {
			s := Send{Producer: t.Producer, Value: w.Value, Partition: w.Partition, Offset: w.Offset, StartMs: t.StartMs, EndMs: t.EndMs}
			switch {
			case t.Outcome == TxnOK && w.Offset >= 0:
				s.Outcome = "ok"
			case t.Outcome == TxnFail:
				s.Outcome = "fail"
				s.Err = fmt.Sprintf("transaction %s (intent %s) did not commit", t.ID, t.Intent)
				if t.Err != "" {
					s.Err += ": " + t.Err
				}
			default:
				s.Outcome = "info"
			}
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartMs < out[j].StartMs })
	return out
}

// CheckTxn analyses the history of the transactional workload: the
// transactions, every record read by read_committed consumer sessions and
// by the final read_committed read, and the final read's bounds (End is
// the last stable offset there).
//
// It runs Check over the transactions' values (G1a, lost-write,
// inconsistent-offsets, duplicate, poll-skip, nonmonotonic-poll, unseen)
// and adds the transactional checks: uncommitted-read, torn-txn and G1c
// (cycles of write-read dependencies, txnCycles). Write-write
// dependencies are left out of the cycle search, as Jepsen's Kafka
// checker does by default (its ww-deps option): Kafka orders transactions
// per partition only, so a ww cycle across partitions is allowed.
func CheckTxn(txns []Txn, reads []Read, fr FinalRead) *Analysis {
	a := check(txnSends(txns), reads, fr, true)
	a.Names = TxnAnomalyNames
	for _, k := range TxnAnomalyNames {
		a.Counts[k] += 0
	}
	byVal := map[string]*Txn{}
	for i := range txns {
		for _, w := range txns[i].Writes {
			byVal[w.Value] = &txns[i]
		}
	}
	readVals := map[string]bool{}
	for _, r := range reads {
		readVals[r.Value] = true
		t := byVal[r.Value]
		if r.Consumer == "final" || t == nil || t.Outcome == TxnFail {
			continue // TxnFail reads are G1a
		}
		if t.CommitMs == 0 || r.AtMs < t.CommitMs {
			a.add(AnomUncommittedRead, "%s session %d read %q at p%d@%d at %.3fs, before transaction %s asked to commit (%s)",
				r.Consumer, r.Session, r.Value, r.Partition, r.Offset, r.AtMs/1000, t.ID, commitAt(t))
		}
	}
	for _, c := range txnCycles(txns, byVal) {
		a.add(AnomG1c, "%s", c)
	}
	for i := range txns {
		t := &txns[i]
		if t.Outcome == TxnFail {
			continue
		}
		var seen, missing []string
		judged := true
		for _, w := range t.Writes {
			if readVals[w.Value] {
				seen = append(seen, fmt.Sprintf("%s@p%d:%d", w.Value, w.Partition, w.Offset))
				continue
			}
			missing = append(missing, fmt.Sprintf("%s@p%d:%d", w.Value, w.Partition, w.Offset))
			if w.Offset < 0 || !fr.Complete[w.Partition] || w.Offset >= fr.End[w.Partition] || w.Offset < fr.Start[w.Partition] {
				judged = false
			}
		}
		if len(seen) > 0 && len(missing) > 0 && judged {
			a.add(AnomTornTxn, "transaction %s (%s, %.3fs-%.3fs) partly visible: read %v, never read %v although the final read covers them",
				t.ID, t.Outcome, t.StartMs/1000, t.EndMs/1000, seen, missing)
		}
	}
	return a
}

func commitAt(t *Txn) string {
	if t.CommitMs == 0 {
		return "never"
	}
	return fmt.Sprintf("at %.3fs", t.CommitMs/1000)
}
