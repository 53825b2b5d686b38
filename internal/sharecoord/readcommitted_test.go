package sharecoord

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/share"
)

// heldReplica is a broker partition whose high watermark the test holds
// below its log end: the records above it are not committed (as those a
// new coordinator loads from its log end).
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

// Commit waits, as the partition's, until the offsets below end are
// committed, and also until the test lets the high watermark reach end.
func (r heldReplica) Commit(end int64) error {
	if err := r.Partition.Commit(end); err != nil {
		return err
	}
	for h := r.held.Load(); h >= 0 && h < end; h = r.held.Load() {
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestReadsAnswerCommittedState: a coordinator loaded with a share
// partition's state above the high watermark answers neither Read nor
// ReadSummary (DescribeShareGroupOffsets) from it until it is committed:
// a coordinator elected next may not have it, and a start offset read
// from it could go back after a failover.
func TestReadsAnswerCommittedState(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	b, err := broker.Open(broker.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.CreateTopic("t", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	held := &atomic.Int64{}
	held.Store(-1)
	c := New(b, Options{Config: Config{NumPartitions: 1, ReplicationFactor: 1, MinISR: 1},
		wrapReplica: func(p *broker.Partition) logReplica { return heldReplica{p, held} }})
	t.Cleanup(c.Close)
	key := share.Key{Group: "g", TopicID: [16]byte(b.Image().Topics["t"].ID), Partition: 0}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; ; i++ {
		err := c.Initialize(ctx, key, 1, 5)
		if err == nil {
			break
		}
		if i == 1000 {
			t.Fatalf("Initialize: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // the topic's creation and load
	}
	p, err := b.Partition(Topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := p.LogEndOffset()
	if err := c.Write(ctx, key, share.State{StateEpoch: 1, StartOffset: 42, DeliveryCompleteCount: -1}); err != nil {
		t.Fatalf("Write: %v", err)
	}

	// A coordinator elected on a replica whose last records (the write of
	// start offset 42) are not committed yet.
	held.Store(before)
	c.rt.Resign(0, -1)
	c.rt.Elect(0, -1)
	for i := 0; ; i++ {
		if info, ok := c.rt.Info(0); ok && !info.Loading {
			break
		}
		if i == 1000 {
			t.Fatal("the shard did not load")
		}
		time.Sleep(time.Millisecond)
	}

	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	if sum, err := c.ReadSummary(short, key); err != context.DeadlineExceeded {
		t.Fatalf("ReadSummary answered start offset %d (%v) from a state above the HW", sum.StartOffset, err)
	}
	cancelShort()
	short, cancelShort = context.WithTimeout(ctx, 300*time.Millisecond)
	if st, err := c.Read(short, key, -1); err != context.DeadlineExceeded {
		t.Fatalf("Read answered start offset %d (%v) from a state above the HW", st.StartOffset, err)
	}
	cancelShort()
	held.Store(-1)
	for i := 0; ; i++ {
		sum, err := c.ReadSummary(ctx, key)
		if err == nil {
			if sum.StartOffset != 42 {
				t.Fatalf("ReadSummary once committed: start offset %d, want 42", sum.StartOffset)
			}
			return
		}
		if i == 1000 {
			t.Fatalf("ReadSummary once committed: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
