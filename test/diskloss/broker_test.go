package diskloss

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestWipedBrokerRejoins: under acks=all load on a 3-node cluster (RF 3,
// min ISR 2), node 2 is killed and its whole data directory (partitions,
// metadata log, producer state) deleted, as when a disk is replaced. It
// restarts empty: its new incarnation registers fenced, out of every ISR;
// it catches up as a follower of each partition and rejoins every ISR;
// then node 3 is killed as well, so node 2's copies are needed for the
// acks=all writes to go on. Every acknowledged record is read back at its
// offset exactly once.
func TestWipedBrokerRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{
		"auto.create.topics.enable": "false", "min.insync.replicas": "2",
	}})
	const topic, partitions = "wiped", 4
	adm := kadm.NewClient(c.Node(1).Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	parts := []int32{0, 1, 2, 3}
	load := c.StartLoad(topic, testcluster.LoadOptions{Partitions: parts, Rate: 400})
	time.Sleep(3 * time.Second)

	n2 := c.Node(2)
	n2.Kill()
	wipe(t, n2.DataDir())
	time.Sleep(2 * time.Second) // the load goes on with ISR {1,3}
	n2.Restart()

	inAllISRs := func(id int32) func() (bool, string) {
		return func() (bool, string) {
			m, err := testcluster.PartitionsFrom(ctx, c.Node(1).Addr(), topic)
			if err != nil {
				return false, err.Error()
			}
			for _, p := range parts {
				if !slices.Contains(m[p].ISR, id) {
					return false, fmt.Sprintf("p%d: %v", p, m[p])
				}
			}
			return true, ""
		}
	}
	took := testcluster.WaitFor(t, 60*time.Second, "wiped node 2 back in every ISR", inAllISRs(2))
	t.Logf("node 2 rejoined every ISR %v after its restart", took.Round(time.Millisecond))

	// Node 2's copies now carry the partitions with node 1.
	n3 := c.Node(3)
	n3.Kill()
	time.Sleep(3 * time.Second)
	n3.Restart()
	testcluster.WaitFor(t, 60*time.Second, "node 3 back in every ISR", inAllISRs(3))
	load.Stop(30 * time.Second)
	t.Log(load.Summary())
	acked := load.Acked()
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	read := c.ConsumeAll(topic, partitions, time.Minute)
	testcluster.CheckAcked(t, "after a wiped broker rejoined", acked, read)
	t.Logf("%d acknowledged records read back at their offsets", len(acked))
}
