package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/vfs"
)

// TestFollowerFetchesWhileFlushing: a follower fetches the leader's next
// batches while its fsync of the previous ones still runs (pipelined
// follower fetches, docs/replication.md), and the leader counts only what
// the follower has flushed: its view of the follower's LEO, the HW and the
// ISR wait for the fsync. Before pipelining the follower fetched only once
// flushed, one batch per fsync.
func TestFollowerFetchesWhileFlushing(t *testing.T) {
	const slow = 2 * time.Second
	q := newFakeQuorum()
	m1 := startMemberWith(t, q, 1, "/data1", "", vfs.NewMem(), map[string]string{"replica.fetch.wait.max.ms": "100"})
	q.update(func(im *metadata.Image) error {
		im.Topics["pipe"] = &metadata.Topic{Name: "pipe", ID: metadata.NewUUID(), Configs: map[string]string{},
			Partitions: []metadata.Partition{{Index: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}}}
		return nil
	})
	// Three batches on the leader before the follower starts, each above
	// the follower's replica.fetch.max.bytes: one batch per fetch.
	cl, err := kgo.NewClient(kgo.SeedBrokers(m1.addr), kgo.DefaultProduceTopic("pipe"),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strings.Repeat(v, 2000))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The follower's fsyncs of the partition's segment take 2 s each.
	rule := &vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, PathContains: "pipe-0/00000000000000000000.log", Delay: slow}
	m2 := startMemberWith(t, q, 2, "/data2", "", vfs.WithFaults(vfs.NewMem(), rule),
		map[string]string{"replica.fetch.wait.max.ms": "100", "replica.fetch.max.bytes": "1024"})
	lp, err := m1.b.Partition("pipe", 0)
	if err != nil {
		t.Fatal(err)
	}
	var f *broker.Partition
	waitFor(t, "broker 2 to replicate the partition", 10*time.Second, func() bool {
		f, err = m2.b.Partition("pipe", 0)
		return err == nil
	})
	start := time.Now()
	for f.LogEndOffset() < 3 {
		if time.Since(start) > slow/2 {
			t.Fatalf("the follower holds %d records (flushed %d) %v after it started: it fetches only once flushed", f.LogEndOffset(), f.Status(nil).FlushedOffset, slow/2)
		}
		time.Sleep(10 * time.Millisecond)
	}
	flushed := f.Status(nil).FlushedOffset
	t.Logf("after %v: LEO %d flushed %d, slow syncs %d", time.Since(start), f.LogEndOffset(), flushed, rule.Fired())
	if flushed >= 2 {
		t.Fatalf("the follower flushed %d before holding 3: it fetched only after flushing", flushed)
	}
	// The leader has not counted the unflushed records: its view of the
	// follower, its HW's followers and its ISR wait for the fsync.
	st := lp.Status([]int32{2})
	if leo := st.FollowerLEO[2]; leo > f.Status(nil).FlushedOffset {
		t.Fatalf("the leader counts the follower at %d, above its flushed offset %d", leo, f.Status(nil).FlushedOffset)
	}
	if len(st.Maximal) != 1 {
		t.Fatalf("ISR %v grew before the follower flushed", st.Maximal)
	}
	rule.Disable()
	waitFor(t, "the follower to flush and join the ISR", 3*slow, func() bool {
		st := lp.Status([]int32{2})
		return st.FollowerLEO[2] == 3 && len(st.Maximal) == 2
	})
	if got := f.Status(nil).FlushedOffset; got != 3 {
		t.Fatalf("follower flushed %d, want 3", got)
	}
}
