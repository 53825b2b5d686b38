package failover

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// burnCPU keeps every CPU of the machine busy in this process until the
// returned function is called: the brokers compete for the cores with it
// (and with the producer), as on a busy machine.
func burnCPU() (stop func()) {
	var done atomic.Bool
	for range runtime.NumCPU() {
		go func() {
			x := 0
			for !done.Load() {
				for i := range 100000 {
					x += i
				}
			}
			_ = x
		}()
	}
	return func() { done.Store(true) }
}

// watchLeaders polls the partitions every 500 ms while run runs and
// reports every leader or leader-epoch change against start.
func watchLeaders(t *testing.T, c *testcluster.Cluster, topic string, parts int32, start map[int32]testcluster.PartitionMeta, run func()) []string {
	t.Helper()
	var changes []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		run()
	}()
	check := func() {
		m, err := c.Meta(topic)
		if err != nil {
			return // a paused or busy node; the next poll asks again
		}
		for p := range parts {
			if m[p].Leader != start[p].Leader || m[p].LeaderEpoch != start[p].LeaderEpoch {
				changes = append(changes, fmt.Sprintf("%s partition %d: %v (was %v)", time.Now().Format("15:04:05.000"), p, m[p], start[p]))
				start[p] = m[p]
			}
		}
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			check()
			return changes
		case <-tick.C:
			check()
		}
	}
}

// fencings returns the lines of the nodes' logs that fence a broker.
func fencings(t *testing.T, c *testcluster.Cluster) []string {
	t.Helper()
	var out []string
	for _, p := range c.Nodes() {
		b, err := os.ReadFile(p.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `msg="fencing broker`) {
				out = append(out, fmt.Sprintf("node %d: %s", p.NodeID(), l))
			}
		}
	}
	return out
}

// loaded starts a three-node cluster with default liveness settings, a
// 6-partition RF 3 topic under an acks=all producer and every CPU busy,
// and returns the agreed partition state once every ISR is full.
func loaded(t *testing.T, topic string) (*testcluster.Cluster, *testcluster.Load, map[int32]testcluster.PartitionMeta, func()) {
	const parts = int32(6)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
	c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	lg := c.StartLoad(topic, testcluster.LoadOptions{Partitions: []int32{0, 1, 2, 3, 4, 5}, Rate: 2000})
	stop := burnCPU()
	start := waitHealedTopic(t, c, topic, parts, time.Minute)
	return c, lg, start, stop
}

// TestQuietUnderLoad: -failover.quiet (30 s; 10m for the full run) of an
// acks=all producer on a machine whose every CPU is busy, with no fault:
// no partition changes leader and no broker is fenced.
func TestQuietUnderLoad(t *testing.T) {
	const topic, parts = "quiet", int32(6)
	c, lg, start, stop := loaded(t, topic)
	defer stop()
	defer lg.Abort()
	changes := watchLeaders(t, c, topic, parts, start, func() { time.Sleep(*quietTime) })
	stop()
	lg.Stop(time.Minute)
	t.Logf("%v under load with every CPU busy: %s; leader changes: %d", *quietTime, lg.Summary(), len(changes))
	for _, ch := range changes {
		t.Errorf("leader change: %s", ch)
	}
	for _, f := range fencings(t, c) {
		t.Errorf("fenced: %s", f)
	}
}

// TestPausedUnderLoad SIGSTOPs, under the same load, first a partition
// leader that is not the active controller and then the active
// controller, each for 5 s (less than broker.session.timeout.ms): a
// paused process keeps its connections and its listener, so nobody is
// fenced and no partition changes leader (the controller role itself
// moves when the active controller is paused, as raft requires).
func TestPausedUnderLoad(t *testing.T) {
	const topic, parts = "paused", int32(6)
	c, lg, start, stop := loaded(t, topic)
	defer stop()
	defer lg.Abort()
	changes := watchLeaders(t, c, topic, parts, start, func() {
		time.Sleep(3 * time.Second)
		ctl := activeController(c)
		victim := int32(-1)
		for p := range parts {
			if start[p].Leader != ctl {
				victim = start[p].Leader
				break
			}
		}
		for _, id := range []int32{victim, ctl} {
			t.Logf("pausing node %d (active controller: %v) for 5 s", id, id == ctl)
			c.Pause(id)
			time.Sleep(5 * time.Second)
			c.Resume(id)
			time.Sleep(5 * time.Second)
		}
	})
	stop()
	lg.Stop(time.Minute)
	t.Logf("%s; leader changes: %d", lg.Summary(), len(changes))
	for _, ch := range changes {
		t.Errorf("leader change: %s", ch)
	}
	for _, f := range fencings(t, c) {
		t.Errorf("fenced: %s", f)
	}
}
