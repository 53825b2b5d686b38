package compaction

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestLaggingReplicaGetsTombstones: while a replica is down, the leader
// keeps tombstones past delete.retention.ms (the replica still holds the
// values they delete); once it is back and has copied them, the tombstones
// go, and no replica's log keeps a deleted key's value.
func TestLaggingReplicaGetsTombstones(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
	const topic = "lagging"
	c.CreateTopic(topic, 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "300",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000", "min.insync.replicas": "2"}, [][]int32{{1, 2, 3}})
	c.WaitTopicReady(topic, 1, 20*time.Second)
	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(20), kgo.RetryTimeout(30*time.Second))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce := func(k int, v []byte) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%02d", k)), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < 40; k++ {
		produce(k, []byte(fmt.Sprintf("first-%d", k)))
	}
	testcluster.WaitFor(t, 30*time.Second, "every replica has the values", func() (bool, string) {
		m, err := c.Meta(topic)
		return err == nil && len(m[0].ISR) == 3, fmt.Sprint(m, err)
	})
	time.Sleep(time.Second) // the follower's last fetch carried its LEO
	lagging := c.Node(3)
	lagging.Kill()
	for k := 0; k < 10; k++ {
		produce(k, nil) // delete keys 0-9
	}
	time.Sleep(400 * time.Millisecond) // roll past the tombstones
	produce(99, []byte("roll"))
	tombstones := func() int {
		n := 0
		for _, r := range readTopic(t, c, topic) {
			if r.Value == nil {
				n++
			}
		}
		return n
	}
	// Past delete.retention.ms, the leader's cleaner keeps them: replica
	// 3 has not copied them. The pass that does so records the lowest
	// tombstone it kept past its horizon for want of the tombstone bound
	// in the partition's cleaner-offset-checkpoint (docs/compaction.md,
	// "Tombstones and lagging replicas"); once it is there, the leader
	// serving them is a fact, not the outcome of a wait.
	m, err := c.Meta(topic)
	if err != nil {
		t.Fatal(err)
	}
	checkpoint := filepath.Join(c.Node(m[0].Leader).DataDir(), topic+"-0", "cleaner-offset-checkpoint")
	testcluster.WaitFor(t, 60*time.Second, "a tombstone kept past its horizon for want of the bound", func() (bool, string) {
		b, err := os.ReadFile(checkpoint)
		if err != nil {
			return false, err.Error()
		}
		var v int
		var first, horizon, blocked int64
		if _, err := fmt.Sscanf(string(b), "%d\n%d %d %d\n", &v, &first, &horizon, &blocked); err != nil || v != 1 {
			return false, fmt.Sprintf("checkpoint %q: %v", b, err)
		}
		return blocked >= 0, fmt.Sprintf("checkpoint %q", b)
	})
	if n := tombstones(); n != 10 {
		t.Fatalf("with replica 3 down, the leader serves %d of the 10 tombstones past delete.retention.ms", n)
	}
	lagging.Restart()
	testcluster.WaitFor(t, 60*time.Second, "replica 3 back in the ISR", func() (bool, string) {
		m, err := c.Meta(topic)
		return err == nil && len(m[0].ISR) == 3, fmt.Sprint(m, err)
	})
	produce(98, []byte("roll again"))
	testcluster.WaitFor(t, 60*time.Second, "the tombstones gone from the leader", func() (bool, string) {
		n := tombstones()
		return n == 0, fmt.Sprintf("%d tombstones", n)
	})
	time.Sleep(3 * time.Second) // the followers' cleaners
	for _, p := range c.Nodes() {
		p.Stop()
	}
	for _, p := range c.Nodes() {
		tomb := 0
		for _, r := range readLog(t, filepath.Join(p.DataDir(), topic+"-0")) {
			var k int
			fmt.Sscanf(r.key, "key-%d", &k)
			switch {
			case r.value == nil:
				tomb++
			case k < 10:
				t.Fatalf("node %d: deleted key %s has value %q at %d", p.NodeID(), r.key, r.value, r.off)
			}
		}
		t.Logf("node %d: %d tombstones left", p.NodeID(), tomb)
	}
}
