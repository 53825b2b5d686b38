package chaos

import (
	"slices"
	"strings"
	"testing"
)

func tw(v string, p int32, off int64) TxnWrite { return TxnWrite{Value: v, Partition: p, Offset: off} }

func rdAt(c string, s int, p int32, off int64, v string, atMs float64) Read {
	return Read{Consumer: c, Session: s, Partition: p, Offset: off, Value: v, AtMs: atMs}
}

// cleanTxnHistory is a history every check must pass: a committed
// transaction over two partitions, an aborted one, a committed
// single-value one, an indeterminate one that committed and one that did
// not. Offsets 1, 3 and 5 of p0 and 1, 3 and 5 of p1 are markers, which
// read_committed consumers never return, and p0@2 is aborted: the readers
// jump over them.
func cleanTxnHistory() ([]Txn, []Read, FinalRead) {
	txns := []Txn{
		{ID: "t0-0", Intent: "commit", Outcome: TxnOK, CommitMs: 10, EndMs: 12, Writes: []TxnWrite{tw("t0-0-0", 0, 0), tw("t0-0-1", 1, 0)}},
		{ID: "t1-0", Intent: "abort", Outcome: TxnFail, EndMs: 15, Writes: []TxnWrite{tw("t1-0-0", 0, 2)}},
		{ID: "t0-1", Intent: "commit", Outcome: TxnInfo, CommitMs: 40, EndMs: 45, Writes: []TxnWrite{tw("t0-1-0", 0, 4), tw("t0-1-1", 1, 2)}},
		{ID: "t1-1", Intent: "commit", Outcome: TxnInfo, CommitMs: 41, EndMs: 46, Writes: []TxnWrite{tw("t1-1-0", 1, 4)}},
		{ID: "t2-0", Intent: "commit", Outcome: TxnOK, CommitMs: 42, EndMs: 47, Writes: []TxnWrite{tw("t2-0-0", 2, 0)}},
	}
	reads := []Read{
		rdAt("c0", 0, 0, 0, "t0-0-0", 20), rdAt("c0", 0, 1, 0, "t0-0-1", 20),
		rdAt("c0", 0, 0, 4, "t0-1-0", 60), rdAt("c0", 0, 1, 2, "t0-1-1", 60), rdAt("c0", 0, 2, 0, "t2-0-0", 60),
		rdAt("final", 0, 0, 0, "t0-0-0", 90), rdAt("final", 0, 0, 4, "t0-1-0", 90),
		rdAt("final", 0, 1, 0, "t0-0-1", 90), rdAt("final", 0, 1, 2, "t0-1-1", 90),
		rdAt("final", 0, 2, 0, "t2-0-0", 90),
	}
	fr := FinalRead{
		Start:    map[int32]int64{0: 0, 1: 0, 2: 0},
		End:      map[int32]int64{0: 6, 1: 6, 2: 2},
		Complete: map[int32]bool{0: true, 1: true, 2: true},
	}
	return txns, reads, fr
}

func withoutRead(reads []Read, v string) []Read {
	return slices.DeleteFunc(slices.Clone(reads), func(r Read) bool { return r.Value == v })
}

func TestCheckTxnClean(t *testing.T) {
	txns, reads, fr := cleanTxnHistory()
	a := CheckTxn(txns, reads, fr)
	if a.Total() != 0 {
		t.Fatalf("anomalies in a clean transactional history: %v %v", a.Counts, a.Examples)
	}
	for _, k := range TxnAnomalyNames {
		if _, ok := a.Counts[k]; !ok {
			t.Errorf("no count for %s", k)
		}
	}
	if s := txnStats(txns); s.Committed != 2 || s.Aborted != 1 || s.AbortIntended != 1 || s.Info != 2 || s.Values != 7 {
		t.Errorf("stats %+v", s)
	}
}

// Each planted anomaly is found, and only it.
func TestCheckTxnAnomalies(t *testing.T) {
	cases := []struct {
		name  string
		kind  string
		plant func(txns []Txn, reads []Read) []Read
	}{
		{"aborted read (G1a)", AnomG1a, func(_ []Txn, rs []Read) []Read {
			return append(rs, rdAt("c1", 0, 0, 2, "t1-0-0", 30))
		}},
		{"read of a transaction aborted after a produce error (G1a)", AnomG1a, func(txns []Txn, rs []Read) []Read {
			txns[3].Outcome, txns[3].Intent, txns[3].CommitMs = TxnFail, "commit", 0
			return append(rs, rdAt("c1", 0, 1, 4, "t1-1-0", 70))
		}},
		{"read before the commit was asked", AnomUncommittedRead, func(_ []Txn, rs []Read) []Read {
			return append(rs, rdAt("c1", 0, 0, 4, "t0-1-0", 35))
		}},
		{"indeterminate transaction partly visible", AnomTornTxn, func(_ []Txn, rs []Read) []Read {
			return withoutRead(rs, "t0-1-1")
		}},
		{"committed write missing from the final read", AnomLostWrite, func(_ []Txn, rs []Read) []Read {
			return withoutRead(rs, "t2-0-0")
		}},
		{"one value at two offsets", AnomDuplicate, func(_ []Txn, rs []Read) []Read {
			return append(rs, rdAt("c1", 0, 0, 6, "t0-0-0", 95))
		}},
		{"one offset with two values", AnomInconsistentOffsets, func(_ []Txn, rs []Read) []Read {
			return append(rs, rdAt("c1", 0, 0, 0, "zzz", 95))
		}},
		{"session offsets going backwards", AnomNonmonotonicPoll, func(_ []Txn, rs []Read) []Read {
			return append(rs, rdAt("c0", 0, 0, 0, "t0-0-0", 70))
		}},
		{"session skipping a committed record", AnomPollSkip, func(_ []Txn, rs []Read) []Read {
			return append(rs, rdAt("c1", 0, 1, 0, "t0-0-1", 70), rdAt("c1", 0, 1, 6, "t9", 71))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			txns, reads, fr := cleanTxnHistory()
			reads = c.plant(txns, reads)
			a := CheckTxn(txns, reads, fr)
			if a.Counts[c.kind] != 1 || a.Total() != 1 {
				t.Fatalf("want exactly one %s, got %v\n%v", c.kind, a.Counts, a.Examples)
			}
		})
	}
}

// A committed transaction whose one value is lost while the other is read
// is both torn and a lost committed write.
func TestCheckTxnTornCommitted(t *testing.T) {
	txns, reads, fr := cleanTxnHistory()
	a := CheckTxn(txns, withoutRead(reads, "t0-0-1"), fr)
	if a.Counts[AnomTornTxn] != 1 || a.Counts[AnomLostWrite] != 1 || a.Total() != 2 {
		t.Fatalf("got %v\n%v", a.Counts, a.Examples)
	}
	// The final read of p1 did not complete: the transaction is not
	// judged torn, but the write is still lost by Jepsen's definition
	// (a consumer read p1 past its offset).
	fr.Complete[1] = false
	if a := CheckTxn(txns, withoutRead(reads, "t0-0-1"), fr); a.Counts[AnomLostWrite] != 1 || a.Total() != 1 {
		t.Fatalf("got %v %v", a.Counts, a.Examples)
	}
}

// TestCheckTxnG1c: transactions that read each other's values form a
// write-read cycle, which read_committed forbids; a chain of reads does
// not, and neither does a read of an aborted value (that is G1a).
func TestCheckTxnG1c(t *testing.T) {
	txns, reads, fr := cleanTxnHistory()
	// t2-0 read t0-1's value: a chain t0-0 -> t0-1 -> t2-0, no cycle.
	txns[2].Reads = []TxnRead{{Value: "t0-0-0", Partition: 0, Offset: 0}}
	txns[4].Reads = []TxnRead{{Value: "t0-1-0", Partition: 0, Offset: 4}, {Value: "t0-0-1", Partition: 1, Offset: 0}}
	if a := CheckTxn(txns, reads, fr); a.Counts[AnomG1c] != 0 {
		t.Fatalf("G1c in a chain of reads: %v", a.Examples[AnomG1c])
	}

	// t0-0 also read t2-0's value: t0-0 -> t2-0 -> t0-0 (and through t0-1).
	txns[0].Reads = []TxnRead{{Value: "t2-0-0", Partition: 2, Offset: 0}}
	a := CheckTxn(txns, reads, fr)
	if a.Counts[AnomG1c] != 1 {
		t.Fatalf("G1c count %d, want 1: %v", a.Counts[AnomG1c], a.Examples[AnomG1c])
	}
	if ex := a.Examples[AnomG1c][0]; !strings.Contains(ex, "cycle of 2 transactions") || !strings.Contains(ex, `t0-0 (ok) read "t2-0-0" of t2-0`) {
		t.Errorf("G1c example %q", ex)
	}

	// The aborted t1-0 reading t0-0 and being read by it is no cycle of
	// committed transactions (the read of t1-0-0 is G1a).
	txns, reads, fr = cleanTxnHistory()
	txns[0].Reads = []TxnRead{{Value: "t1-0-0", Partition: 0, Offset: 2}}
	txns[1].Reads = []TxnRead{{Value: "t0-0-0", Partition: 0, Offset: 0}}
	if a := CheckTxn(txns, reads, fr); a.Counts[AnomG1c] != 0 {
		t.Fatalf("G1c through an aborted transaction: %v", a.Examples[AnomG1c])
	}
}
