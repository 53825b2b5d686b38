package txn

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/clock"
)

// The requests a producer sends while its previous transaction's markers
// are still being written: under transaction version 2 its EndTxn answered
// with the next transaction's epoch (or producer id) and it goes on at
// once. Each must get the retriable CONCURRENT_TRANSACTIONS (or be held
// until the markers are in), never a fatal error.

// heldMarkers returns a coordinator whose marker requests wait until the
// returned release is called (at most once).
func heldMarkers(t *testing.T) (c *Coordinator, release func()) {
	t.Helper()
	clk := clock.NewManual(t0)
	b := openBroker(t)
	g := &gatedMarkers{gate: make(chan struct{}), arrived: make(chan struct{}, 100)}
	c = testCoordinator(t, b, clk, &fakeMarkers{})
	c.markers = g
	released := false
	release = func() {
		if !released {
			released = true
			close(g.gate)
		}
	}
	t.Cleanup(release)
	return c, release
}

// beginTxn initializes id and adds t-0 to its first transaction.
func beginTxn(t *testing.T, c *Coordinator, id string) int64 {
	t.Helper()
	pid := initTxn(t, c, id, -1, -1).ProducerID
	if err := c.AddPartitions(id, pid, 0, []Partition{{"t", 0}}).Get(); err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestCoordinatorVersion2EndWhileMarkers: an EndTxn that arrives while the
// previous transaction's markers are written answers CONCURRENT_TRANSACTIONS
// whatever it asks (Kafka's pendingTransitionInProgress, checked before the
// epoch and the state): the next transaction's abort or commit at the new
// epoch, the retry at the old one, and under transaction version 1 an end
// the other way. Once the markers are in, the abort goes through.
func TestCoordinatorVersion2EndWhileMarkers(t *testing.T) {
	c, release := heldMarkers(t)
	pid := beginTxn(t, c, "tx")
	if e := c.EndTxn("tx", pid, 0, true, 2).Get(); e.Err != nil || e.Epoch != 1 {
		t.Fatalf("commit: %+v", e)
	}
	for _, tc := range []struct {
		name   string
		epoch  int16
		commit bool
	}{
		{"abort at the next epoch", 1, false},
		{"commit at the next epoch", 1, true},
		{"abort at the old epoch", 0, false},
		{"commit retry", 0, true},
	} {
		if e := c.EndTxn("tx", pid, tc.epoch, tc.commit, 2).Get(); e.Err != kerr.ConcurrentTransactions {
			t.Errorf("%s while the markers are written: %+v, want CONCURRENT_TRANSACTIONS", tc.name, e)
		}
	}
	// Transaction version 1: the other end at the same epoch.
	pid1 := beginTxn(t, c, "tx1")
	if e := c.EndTxn("tx1", pid1, 0, true, 0).Get(); e.Err != nil {
		t.Fatalf("commit v1: %+v", e)
	}
	if e := c.EndTxn("tx1", pid1, 0, false, 0).Get(); e.Err != kerr.ConcurrentTransactions {
		t.Errorf("v1 abort while the markers are written: %+v, want CONCURRENT_TRANSACTIONS", e)
	}
	release()
	waitState(t, c, "tx", CompleteCommit)
	if e := c.EndTxn("tx", pid, 1, false, 2).Get(); e.Err != nil || e.Epoch != 2 {
		t.Fatalf("abort after the markers: %+v", e)
	}
	waitState(t, c, "tx", CompleteAbort)
	waitState(t, c, "tx1", CompleteCommit)
	if e := c.EndTxn("tx1", pid1, 0, false, 0).Get(); e.Err != kerr.InvalidTxnState {
		t.Errorf("v1 abort of a committed transaction: %+v, want INVALID_TXN_STATE", e)
	}
}

// TestTransactionVersion2AbortAfterCommit is franz-go's transact session
// under transaction version 2: it commits, begins the next transaction at
// once (its first produce adds t-1), then aborts it. The add is held until
// the commit's markers are in; the abort, sent meanwhile, is retried on
// CONCURRENT_TRANSACTIONS and ends the transaction that holds t-1.
func TestTransactionVersion2AbortAfterCommit(t *testing.T) {
	c, release := heldMarkers(t)
	pid := beginTxn(t, c, "tx")
	if e := c.EndTxn("tx", pid, 0, true, 2).Get(); e.Err != nil || e.Epoch != 1 {
		t.Fatalf("commit: %+v", e)
	}
	added := make(chan *kerr.Error, 1)
	go func() { added <- c.AddPartitions("tx", pid, 1, []Partition{{"t", 1}}).Get() }()
	if e := c.EndTxn("tx", pid, 1, false, 2).Get(); e.Err != kerr.ConcurrentTransactions {
		t.Fatalf("abort while the commit's markers are written: %+v, want CONCURRENT_TRANSACTIONS", e)
	}
	release()
	if err := <-added; err != nil {
		t.Fatalf("the next transaction's add: %v", err)
	}
	var e EndResult
	for i := 0; ; i++ {
		if e = c.EndTxn("tx", pid, 1, false, 2).Get(); e.Err != kerr.ConcurrentTransactions || i == 3000 {
			break
		}
		time.Sleep(time.Millisecond) // polls for the add's record
	}
	if e.Err != nil || e.Epoch != 2 {
		t.Fatalf("abort: %+v", e)
	}
	m := waitState(t, c, "tx", CompleteAbort)
	if m.Epoch != 2 || m.LastEpoch != 1 {
		t.Fatalf("after the abort: %+v", m)
	}
}

// TestCoordinatorVersion2AddWhileRotating: a commit that exhausts the epoch
// answers a new producer id, which the producer uses at once, before the
// completion moves the transactional id to it. Its add is held and then
// succeeds, its verification and its EndTxn are CONCURRENT_TRANSACTIONS
// meanwhile (not INVALID_PRODUCER_ID_MAPPING).
func TestCoordinatorVersion2AddWhileRotating(t *testing.T) {
	c, release := heldMarkers(t)
	pid := beginTxn(t, c, "tx")
	s, err := c.lockShard("tx")
	if err != nil {
		t.Fatal(err)
	}
	s.txns["tx"].Epoch = math.MaxInt16 - 1
	s.mu.Unlock()
	e := c.EndTxn("tx", pid, math.MaxInt16-1, true, 2).Get()
	if e.Err != nil || e.ProducerID == pid || e.Epoch != 0 {
		t.Fatalf("commit at the exhausted epoch: %+v", e)
	}
	next := e.ProducerID
	t1 := Partition{"t", 1}
	if err := c.VerifyPartitions("tx", next, 0, []Partition{t1})[t1]; err != kerr.ConcurrentTransactions {
		t.Errorf("verification with the next producer id: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	if r := c.EndTxn("tx", next, 0, false, 2).Get(); r.Err != kerr.ConcurrentTransactions {
		t.Errorf("abort with the next producer id: %+v, want CONCURRENT_TRANSACTIONS", r)
	}
	added := make(chan *kerr.Error, 1)
	go func() { added <- c.AddPartitions("tx", next, 0, []Partition{t1}).Get() }()
	time.Sleep(20 * time.Millisecond) // the add is held, not answered
	select {
	case err := <-added:
		t.Fatalf("add answered while the markers are written: %v", err)
	default:
	}
	release()
	if err := <-added; err != nil {
		t.Fatalf("add with the next producer id: %v", err)
	}
	if m, _ := c.Describe("tx"); m.ProducerID != next || m.State != Ongoing {
		t.Fatalf("after the add: %+v", m)
	}
}
