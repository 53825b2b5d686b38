package txn

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/clock"
)

var t0 = time.Unix(2_000_000, 0)

// mustPrepare returns a prepared transit; a refusal panics (failing the
// test).
func mustPrepare(tr *Transit, err error) *Transit {
	if err != nil {
		panic(err)
	}
	return tr
}

func TestStateValidTransitions(t *testing.T) {
	// Kafka 4's TransactionState.validPreviousStates, in full (an empty
	// abort under transaction version 2 enters PrepareAbort from Empty
	// and the Complete states).
	want := map[State][]State{
		Empty:             {Empty, CompleteCommit, CompleteAbort},
		Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
		PrepareCommit:     {Ongoing},
		PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
		CompleteCommit:    {PrepareCommit},
		CompleteAbort:     {PrepareAbort},
		Dead:              {Empty, CompleteAbort, CompleteCommit},
		PrepareEpochFence: {Ongoing},
	}
	for to := Empty; to <= PrepareEpochFence; to++ {
		for from := Empty; from <= PrepareEpochFence; from++ {
			allowed := false
			for _, s := range want[to] {
				allowed = allowed || s == from
			}
			if CanTransition(from, to) != allowed {
				t.Errorf("%v -> %v: got %v, want %v", from, to, !allowed, allowed)
			}
		}
	}
	if Ongoing.String() != "Ongoing" || State(9).String() != "Unknown" {
		t.Fatal("names")
	}
}

// newTxn is a transactional id initialized at epoch 0.
func newTxn(t *testing.T) *Metadata {
	m := NewMetadata("tx", 1000, time.Minute, t0)
	m.Complete(mustPrepare(m.PrepareInit(time.Minute, nil, t0)))
	if m.Epoch != 0 || m.State != Empty {
		t.Fatalf("init: %+v", m)
	}
	return m
}

func TestStateCommitCycle(t *testing.T) {
	m := newTxn(t)
	p0, p1 := Partition{"a", 0}, Partition{"b", 1}
	tr := mustPrepare(m.PrepareAddPartitions([]Partition{p0}, t0.Add(time.Second)))
	if s, ok := m.PendingState(); !ok || s != Ongoing {
		t.Fatal("pending")
	}
	// Nothing else may be prepared while a transit is pending.
	if _, err := m.PrepareAddPartitions([]Partition{p1}, t0); err != kerr.ConcurrentTransactions {
		t.Fatalf("concurrent: %v", err)
	}
	if m.State != Empty {
		t.Fatal("applied before durable")
	}
	m.Complete(tr)
	if m.State != Ongoing || !m.Start.Equal(t0.Add(time.Second)) || len(m.Partitions) != 1 {
		t.Fatalf("ongoing: %+v", m)
	}
	m.Complete(mustPrepare(m.PrepareAddPartitions([]Partition{p1}, t0.Add(2*time.Second))))
	if len(m.Partitions) != 2 || !m.Start.Equal(t0.Add(time.Second)) {
		t.Fatalf("second add: %+v", m)
	}
	m.Complete(mustPrepare(m.PrepareEnd(true, 0, -1, t0.Add(3*time.Second))))
	if m.State != PrepareCommit || m.Epoch != 0 || len(m.Partitions) != 2 {
		t.Fatalf("prepare commit: %+v", m)
	}
	if _, err := m.PrepareAddPartitions([]Partition{p0}, t0); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("add while preparing: %v", err)
	}
	m.Complete(mustPrepare(m.PrepareComplete(t0.Add(4 * time.Second))))
	if m.State != CompleteCommit || len(m.Partitions) != 0 || !m.Start.IsZero() {
		t.Fatalf("complete: %+v", m)
	}
	// The next transaction begins from CompleteCommit.
	m.Complete(mustPrepare(m.PrepareAddPartitions([]Partition{p1}, t0.Add(5*time.Second))))
	m.Complete(mustPrepare(m.PrepareEnd(false, 0, -1, t0)))
	m.Complete(mustPrepare(m.PrepareComplete(t0)))
	if m.State != CompleteAbort {
		t.Fatal(m.State)
	}
	if _, err := m.PrepareComplete(t0); !errors.Is(err, ErrIllegalTransition) {
		t.Fatal("complete twice")
	}
}

func TestStateInitEpochs(t *testing.T) {
	m := newTxn(t)
	// A new instance (no expected epoch) bumps.
	m.Complete(mustPrepare(m.PrepareInit(time.Minute, nil, t0)))
	if m.Epoch != 1 || m.LastEpoch != -1 {
		t.Fatalf("bump: %+v", m)
	}
	// KIP-360: the current epoch bumps, recording the last one.
	e := int16(1)
	m.Complete(mustPrepare(m.PrepareInit(time.Minute, &e, t0)))
	if m.Epoch != 2 || m.LastEpoch != 1 {
		t.Fatalf("kip-360 bump: %+v", m)
	}
	// A retry of that bump (its answer lost) gets the same epoch.
	m.Complete(mustPrepare(m.PrepareInit(time.Minute, &e, t0)))
	if m.Epoch != 2 {
		t.Fatalf("retry: %+v", m)
	}
	// Any other epoch is fenced.
	old := int16(0)
	if _, err := m.PrepareInit(time.Minute, &old, t0); err != kerr.ProducerFenced {
		t.Fatalf("fenced: %v", err)
	}
	// At the exhausted epoch only a rotation is possible.
	m.Epoch = math.MaxInt16 - 1
	if _, err := m.PrepareInit(time.Minute, nil, t0); !errors.Is(err, ErrIllegalTransition) {
		t.Fatal("bump past exhaustion")
	}
	m.Complete(mustPrepare(m.PrepareRotate(2000, time.Minute, true, t0)))
	if m.ProducerID != 2000 || m.PrevProducerID != 1000 || m.Epoch != 0 || m.LastEpoch != math.MaxInt16-1 {
		t.Fatalf("rotate: %+v", m)
	}
}

func TestStateFence(t *testing.T) {
	m := newTxn(t)
	m.Complete(mustPrepare(m.PrepareAddPartitions([]Partition{{"a", 0}}, t0)))
	tr := mustPrepare(m.PrepareFence(2, t0))
	if s, _ := m.PendingState(); s != PrepareEpochFence {
		t.Fatalf("pending %v", s)
	}
	if tr.State != PrepareAbort || tr.Epoch != 1 {
		t.Fatalf("fence transit: %+v", tr)
	}
	// A failed fence write is retried at the same bumped epoch.
	m.Abandon(tr)
	if m.State != Ongoing || m.Epoch != 0 {
		t.Fatal("abandon applied")
	}
	tr = mustPrepare(m.PrepareFence(2, t0))
	if tr.Epoch != 0 {
		// failedFence: the epoch of the retry is the current one,
		// as Kafka's hasFailedEpochFence.
		t.Fatalf("retried fence bumped again: %d", tr.Epoch)
	}
	m.Abandon(tr)
	m.failedFence = false
	m.Complete(mustPrepare(m.PrepareFence(2, t0)))
	if m.State != PrepareAbort || m.Epoch != 1 || m.LastEpoch != 0 || len(m.Partitions) != 1 {
		t.Fatalf("fenced: %+v", m)
	}
	m.Complete(mustPrepare(m.PrepareComplete(t0)))
	if m.State != CompleteAbort || m.Epoch != 1 {
		t.Fatal(m.State)
	}
	if _, err := m.PrepareFence(2, t0); !errors.Is(err, ErrIllegalTransition) {
		t.Fatal("fence outside a transaction")
	}
}

func TestStateTxnVersion2(t *testing.T) {
	m := newTxn(t)
	m.Complete(mustPrepare(m.PrepareAddPartitions([]Partition{{"a", 0}}, t0)))
	m.Complete(mustPrepare(m.PrepareEnd(true, 2, -1, t0)))
	if m.Epoch != 1 || m.LastEpoch != 0 || m.TxnVersion != 2 {
		t.Fatalf("tv2 bump: %+v", m)
	}
	m.Complete(mustPrepare(m.PrepareComplete(t0)))
	// Exhaustion: the completion moves to the next producer id.
	m.Epoch = math.MaxInt16 - 1
	m.Complete(mustPrepare(m.PrepareAddPartitions([]Partition{{"a", 0}}, t0)))
	m.Complete(mustPrepare(m.PrepareEnd(false, 2, 3000, t0)))
	if m.Epoch != math.MaxInt16 || m.NextProducerID != 3000 {
		t.Fatalf("tv2 exhausted: %+v", m)
	}
	m.Complete(mustPrepare(m.PrepareComplete(t0)))
	if m.ProducerID != 3000 || m.Epoch != 0 || m.PrevProducerID != 1000 || m.NextProducerID != -1 {
		t.Fatalf("rotated at completion: %+v", m)
	}
}

func TestStateTimeoutAndExpiry(t *testing.T) {
	clk := clock.NewManual(t0)
	m := NewMetadata("tx", 1, 10*time.Second, clk.Now())
	m.Complete(mustPrepare(m.PrepareInit(10*time.Second, nil, clk.Now())))
	clk.Advance(time.Hour)
	if m.TimedOut(clk.Now()) {
		t.Fatal("no transaction, no timeout")
	}
	if !m.Expired(clk.Now(), time.Hour) || m.Expired(clk.Now(), 2*time.Hour) {
		t.Fatal("expiry")
	}
	m.Complete(mustPrepare(m.PrepareAddPartitions([]Partition{{"a", 0}}, clk.Now())))
	if m.Expired(clk.Now().Add(10*time.Hour), time.Hour) {
		t.Fatal("an ongoing transaction expired")
	}
	clk.Advance(10 * time.Second)
	if m.TimedOut(clk.Now()) {
		t.Fatal("timed out at the timeout")
	}
	clk.Advance(time.Millisecond)
	if !m.TimedOut(clk.Now()) {
		t.Fatal("not timed out after the timeout")
	}
	tr := mustPrepare(m.PrepareFence(2, clk.Now()))
	if m.TimedOut(clk.Now()) {
		t.Fatal("timed out while a fence is pending")
	}
	m.Complete(tr)
	m.Complete(mustPrepare(m.PrepareComplete(clk.Now())))
	m.Complete(mustPrepare(m.PrepareDead(clk.Now())))
	if m.State != Dead {
		t.Fatal(m.State)
	}
	if _, err := m.PrepareAddPartitions(nil, clk.Now()); !errors.Is(err, ErrIllegalTransition) {
		t.Fatal("revived a dead id")
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	m := newTxn(t)
	parts := []Partition{{"b", 2}, {"a", 1}, {"a", 0}}
	tr := mustPrepare(m.PrepareAddPartitions(parts, t0.Add(time.Second)))
	m.Complete(tr)
	tr = mustPrepare(m.PrepareEnd(true, 0, -1, t0.Add(2*time.Second)))
	rec := txnRecord("tx", tr)
	l := loaded{}
	if err := l.apply(rec.key, rec.value); err != nil {
		t.Fatal(err)
	}
	got := l["tx"]
	if got == nil || got.State != PrepareCommit || got.ProducerID != 1000 || got.Epoch != 0 ||
		len(got.Partitions) != 3 || !got.Start.Equal(t0.Add(time.Second)) || got.Timeout != time.Minute {
		t.Fatalf("round trip: %+v", got)
	}
	// A tombstone removes it.
	dead := txnRecord("tx", &Transit{State: Dead})
	if dead.value != nil {
		t.Fatal("dead is not a tombstone")
	}
	if err := l.apply(dead.key, dead.value); err != nil || l["tx"] != nil {
		t.Fatal("tombstone")
	}
	// Transaction version 2 values are v1 (flexible) with the tagged ids.
	tr.TxnVersion, tr.NextProducerID = 2, 77
	rec = txnRecord("tx", tr)
	if err := l.apply(rec.key, rec.value); err != nil || l["tx"].NextProducerID != 77 || l["tx"].TxnVersion != 2 {
		t.Fatalf("v1 value: %v %+v", err, l["tx"])
	}
	if PartitionFor("tx", 50) != PartitionFor("tx", 50) || PartitionFor("", 50) != 0 {
		t.Fatal("partition")
	}
}

func TestListFilter(t *testing.T) {
	m := newTxn(t)
	now := t0.Add(time.Hour)
	all := ListFilter{MinDuration: -1}
	if !all.selects(m, now) {
		t.Fatal("no filter")
	}
	if (ListFilter{States: map[State]bool{Ongoing: true}, MinDuration: -1}).selects(m, now) {
		t.Fatal("state filter")
	}
	if (ListFilter{ProducerIDs: map[int64]bool{7: true}, MinDuration: -1}).selects(m, now) {
		t.Fatal("producer filter")
	}
	// Outside a transaction the start counts as -1: any duration passes.
	if !(ListFilter{MinDuration: time.Minute}).selects(m, now) {
		t.Fatal("duration, no transaction")
	}
	m.Complete(mustPrepare(m.PrepareAddPartitions([]Partition{{"a", 0}}, now.Add(-time.Minute))))
	if (ListFilter{MinDuration: time.Minute}).selects(m, now) || !(ListFilter{MinDuration: time.Second}).selects(m, now) {
		t.Fatal("duration")
	}
	if s, ok := StateByName("PrepareEpochFence"); !ok || s != PrepareEpochFence {
		t.Fatal("by name")
	}
	if _, ok := StateByName("Nope"); ok {
		t.Fatal("unknown name")
	}
}
