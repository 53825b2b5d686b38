package txn

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
)

// heldCoordinator is a stepped coordinator whose replicas' high
// watermark the test can hold (heldReplica), with its marker sender.
func heldCoordinator(t *testing.T) (*Coordinator, *atomic.Int64, *stepMarkers) {
	t.Helper()
	b := openBroker(t)
	if err := b.CreateTopic(Topic, 3, 1, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	held := &atomic.Int64{}
	held.Store(-1)
	hm := &stepMarkers{}
	c := New(b, Options{Config: ConfigFrom(b.Config()), Clock: clock.NewManual(time.Now()), Stepped: true, StepMarkers: hm,
		wrapReplica: func(p *broker.Partition) logReplica { return heldReplica{p, held} }})
	t.Cleanup(c.Close)
	return c, held, hm
}

// beginHeld initializes id and adds parts to its transaction.
func beginHeld(t *testing.T, c *Coordinator, id string, parts []Partition) InitResult {
	t.Helper()
	var init InitResult
	for i := 0; ; i++ {
		c.Drain()
		if init = pollStepped(t, c, c.InitProducerID(id, 60000, -1, -1)); init.Err != kerr.CoordinatorLoadInProgress || i == 100 {
			break
		}
	}
	if init.Err != nil {
		t.Fatalf("InitProducerId: %v", init.Err)
	}
	if err := pollStepped(t, c, c.AddPartitions(id, init.ProducerID, init.Epoch, parts)); err != nil {
		t.Fatalf("AddPartitionsToTxn: %v", err)
	}
	return init
}

// reloadHeld unloads id's shard and loads it again with the high
// watermark held below the last record of its log, as a coordinator
// elected on a replica whose last record is not committed yet.
func reloadHeld(t *testing.T, c *Coordinator, held *atomic.Int64, id string) {
	t.Helper()
	var end int64
	if err := c.run(id, func(s *shard) { end = s.Replica().LogEndOffset() }); err != nil {
		t.Fatal(err)
	}
	held.Store(end - 1)
	i := PartitionFor(id, 3)
	c.Resign(i)
	c.Drain()
	c.Elect(i)
	for j := 0; ; j++ {
		c.Drain()
		if info, ok := c.rt.Info(i); ok && !info.Loading {
			break
		}
		if j == 1000 {
			t.Fatal("the shard did not load")
		}
		time.Sleep(time.Millisecond)
	}
}

// notAnswered fails if r is answered while the test steps c.
func notAnswered[T any](t *testing.T, c *Coordinator, r Result[T], what string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		c.Drain()
		if r.Wait == nil {
			t.Fatalf("%s was answered (%+v) from a state above the HW", what, r.Resp)
		}
		if v, ok := r.Poll(); ok {
			t.Fatalf("%s was answered (%+v) from a state above the HW", what, v)
		}
	}
}

// TestRetriedEndTxnWaitsForCommittedCompletion: a coordinator loaded
// with the CompleteCommit record above the high watermark answers a
// retried EndTxn only once that record is committed. Answered NONE at
// once, the producer takes its transaction as committed while the
// coordinator elected next, without the record, may still have it
// prepared or, without the PrepareCommit either, ongoing and abort it.
func TestRetriedEndTxnWaitsForCommittedCompletion(t *testing.T) {
	c, held, hm := heldCoordinator(t)
	init := beginHeld(t, c, "a", []Partition{{"t", 0}})
	if end := pollStepped(t, c, c.EndTxn("a", init.ProducerID, init.Epoch, true, 1)); end.Err != nil {
		t.Fatalf("EndTxn: %v", end.Err)
	}
	c.Drain()
	hm.answer(nil, 0)
	for i := 0; stateOf(t, c, "a") != CompleteCommit; i++ {
		if i == 5000 {
			t.Fatalf("never CompleteCommit: %v", stateOf(t, c, "a"))
		}
		c.Drain()
		time.Sleep(time.Millisecond)
	}
	reloadHeld(t, c, held, "a")
	if got := stateOf(t, c, "a"); got != CompleteCommit {
		t.Fatalf("loaded %v, want CompleteCommit", got)
	}
	r := c.EndTxn("a", init.ProducerID, init.Epoch, true, 1)
	notAnswered(t, c, r, "a retried EndTxn")
	held.Store(-1)
	if end := pollStepped(t, c, r); end.Err != nil {
		t.Fatalf("the retried EndTxn once committed: %v", end.Err)
	}
}

// TestRollForwardWaitsForCommittedPrepare: a coordinator loaded with a
// PrepareCommit record above the high watermark sends the transaction's
// markers only once that record is committed: a coordinator elected next
// without it would see the transaction ongoing and could abort it, with
// some partitions already committed.
func TestRollForwardWaitsForCommittedPrepare(t *testing.T) {
	c, held, hm := heldCoordinator(t)
	init := beginHeld(t, c, "a", []Partition{{"t", 0}})
	if end := pollStepped(t, c, c.EndTxn("a", init.ProducerID, init.Epoch, true, 1)); end.Err != nil {
		t.Fatalf("EndTxn: %v", end.Err)
	}
	c.Drain()
	if len(hm.reqs) != 1 {
		t.Fatalf("%d marker requests, want 1", len(hm.reqs))
	}
	hm.reqs, hm.dones = nil, nil // the round of the shard unloaded next
	reloadHeld(t, c, held, "a")
	for i := 0; i < 20; i++ {
		c.Drain()
	}
	if len(hm.reqs) != 0 {
		t.Fatalf("markers sent for a PrepareCommit above the HW: %+v", hm.reqs)
	}
	r := c.EndTxn("a", init.ProducerID, init.Epoch, true, 1)
	notAnswered(t, c, r, "a retried EndTxn")
	held.Store(-1)
	if got := pollStepped(t, c, r); got.Err != kerr.ConcurrentTransactions {
		t.Fatalf("EndTxn retried while prepared: %v, want CONCURRENT_TRANSACTIONS", got.Err)
	}
	for i := 0; len(hm.reqs) == 0; i++ {
		if i == 5000 {
			t.Fatal("no markers once the PrepareCommit is committed")
		}
		c.Drain()
		time.Sleep(time.Millisecond)
	}
	if mk := hm.reqs[0].Markers[0]; !mk.Committed || mk.ProducerID != init.ProducerID {
		t.Fatalf("marker %+v", mk)
	}
}

// TestVerifyWaitsForCommittedAdd: a partition leader's verification
// (KIP-890) is answered from the committed state: a partition shown in
// the transaction only by a record above the high watermark is not
// verified yet (the stepped coordinator answers CONCURRENT_TRANSACTIONS,
// which the leader retries), else the producer would write records that
// a coordinator elected next, not knowing the partition is in the
// transaction, ends with no marker.
func TestVerifyWaitsForCommittedAdd(t *testing.T) {
	c, held, _ := heldCoordinator(t)
	tp := Partition{"t", 0}
	init := beginHeld(t, c, "a", []Partition{tp})
	reloadHeld(t, c, held, "a")
	if err := c.VerifyPartitions("a", init.ProducerID, init.Epoch, []Partition{tp})[tp]; err != kerr.ConcurrentTransactions {
		t.Fatalf("verified with the AddPartitions record above the HW: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	held.Store(-1)
	var err *kerr.Error
	for i := 0; i < 5000; i++ {
		c.Drain()
		if err = c.VerifyPartitions("a", init.ProducerID, init.Epoch, []Partition{tp})[tp]; err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("not verified once committed: %v", err)
}

// TestDescribeAnswersCommittedState: DescribeTransactions reports the
// committed state: a transaction shown ongoing only by a record above the
// high watermark is not described until it is committed (the stepped
// coordinator answers COORDINATOR_LOAD_IN_PROGRESS meanwhile).
func TestDescribeAnswersCommittedState(t *testing.T) {
	c, held, _ := heldCoordinator(t)
	tp := Partition{"t", 0}
	beginHeld(t, c, "a", []Partition{tp})
	reloadHeld(t, c, held, "a")
	if m, err := c.DescribeState("a"); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("described %v %v with its AddPartitions record above the HW, want COORDINATOR_LOAD_IN_PROGRESS", m.State, err)
	}
	held.Store(-1)
	for i := 0; i < 5000; i++ {
		c.Drain()
		m, err := c.DescribeState("a")
		if err == nil {
			if _, ok := m.Partitions[tp]; m.State != Ongoing || !ok {
				t.Fatalf("described %v %v once committed", m.State, m.Partitions)
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("never described once committed")
}
