package txn

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
)

// heldReplica is a broker partition whose high watermark the test holds
// below its log end: the records above it are not committed (as those a
// new coordinator loads from its log end, or a write whose followers have
// not fetched it yet).
type heldReplica struct {
	*broker.Partition
	held *atomic.Int64 // the HW shown, -1 for the partition's own
}

func (r heldReplica) HighWatermark() int64 {
	if h := r.held.Load(); h >= 0 {
		return min(h, r.Partition.HighWatermark())
	}
	return r.Partition.HighWatermark()
}

// TestAddPartitionsWaitsForCommittedState: AddPartitionsToTxn naming
// partitions already in the transaction writes nothing, but is answered
// only once the record that put them there is committed. Answered at
// once, a producer would write to a partition that a coordinator elected
// next (without the record) does not know is in the transaction: that
// coordinator ends the transaction with no marker there, and the records
// stay open until the producer's next transaction commits them.
func TestAddPartitionsWaitsForCommittedState(t *testing.T) {
	b := openBroker(t)
	if err := b.CreateTopic(Topic, 3, 1, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	held := &atomic.Int64{}
	held.Store(-1)
	clk := clock.NewManual(time.Now())
	c := New(b, Options{Config: ConfigFrom(b.Config()), Clock: clk, Stepped: true, StepMarkers: &stepMarkers{},
		wrapReplica: func(p *broker.Partition) logReplica { return heldReplica{p, held} }})
	t.Cleanup(c.Close)

	var init InitResult
	for i := 0; ; i++ {
		c.Drain()
		if init = pollStepped(t, c, c.InitProducerID("a", 60000, -1, -1)); init.Err != kerr.CoordinatorLoadInProgress || i == 100 {
			break
		}
	}
	if init.Err != nil {
		t.Fatalf("InitProducerId: %v", init.Err)
	}
	parts := []Partition{{"t", 0}}
	for i := 0; ; i++ {
		c.Drain()
		err := pollStepped(t, c, c.AddPartitions("a", init.ProducerID, init.Epoch, parts))
		if err == nil {
			break
		}
		if err != kerr.CoordinatorLoadInProgress || i == 100 {
			t.Fatalf("AddPartitionsToTxn: %v", err)
		}
	}
	// A coordinator elected next loads the AddPartitions record (the last
	// of the id's partition) while it is not committed.
	reloadHeld(t, c, held, "a")

	r := c.AddPartitions("a", init.ProducerID, init.Epoch, parts)
	for i := 0; i < 20; i++ {
		c.Drain()
		if r.Poll == nil {
			t.Fatalf("a retried AddPartitionsToTxn was answered (%v) with its state above the HW", r.Resp)
		}
		if err, ok := r.Poll(); ok {
			t.Fatalf("a retried AddPartitionsToTxn was answered (%v) with its state above the HW", err)
		}
	}
	held.Store(-1)
	if err := pollStepped(t, c, r); err != nil {
		t.Fatalf("AddPartitionsToTxn once committed: %v", err)
	}
}
