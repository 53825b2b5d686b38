package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestControlledShutdownUnderLoad SIGTERMs the leader of partition 0 while
// an idempotent acks=all producer writes to an RF 3, min.insync.replicas=2
// topic with several partitions. A controlled shutdown moves leadership
// away and takes the broker out of the ISRs before it stops, so the
// producer must never see NOT_ENOUGH_REPLICAS(_AFTER_APPEND), and every
// acknowledged record must be at its offset, once. The broker then
// restarts and rejoins.
func TestControlledShutdownUnderLoad(t *testing.T) {
	c := startCluster(t, 3, nil)
	const topic, parts = "controlled", int32(6)
	c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	lg := c.startLoad(topic, parts, 1500)
	defer lg.Abort()
	testcluster.WaitFor(t, 30*time.Second, "1000 acks before the shutdown", func() (bool, string) {
		n, _ := lg.AcksSince(time.Time{}, -1)
		return n >= 1000, lg.Summary()
	})
	md, err := c.Meta(topic)
	if err != nil {
		t.Fatal(err)
	}
	x := md[0].Leader
	var led []int32
	for p, m := range md {
		if m.Leader == x {
			led = append(led, p)
		}
	}
	slices.Sort(led)
	t.Logf("SIGTERM node %d, leader of partitions %v", x, led)
	stopAt := time.Now()
	c.Node(x).Stop()
	stopped := time.Since(stopAt)
	t.Logf("controlled shutdown of node %d took %v", x, stopped.Round(time.Millisecond))
	// Kafka grants the shutdown only once every active broker has applied the
	// leadership changes (docs/kafka-replication.md §4.3), so the survivors'
	// Metadata should show them at once; sluice may lag a little
	// (TestBrokerBug_ControlledShutdownGrantedBeforeSurvivorsApplied).
	moved := testcluster.WaitFor(t, 10*time.Second, fmt.Sprintf("survivors' Metadata without node %d as leader or in an ISR", x), func() (bool, string) {
		all, err := c.MetaAll(topic)
		if err != nil {
			return false, err.Error()
		}
		for id, m := range all {
			for p, pm := range m {
				if pm.Leader == x || slices.Contains(pm.ISR, x) {
					return false, fmt.Sprintf("node %d sees partition %d: %v", id, p, pm)
				}
			}
		}
		return true, ""
	})
	t.Logf("survivors' Metadata showed the moved leaderships %v after node %d exited", moved.Round(time.Millisecond), x)
	testcluster.WaitFor(t, 30*time.Second, "acks on every partition after the shutdown", func() (bool, string) {
		for p := int32(0); p < parts; p++ {
			if n, _ := lg.AcksSince(stopAt.Add(stopped), p); n < 100 {
				return false, fmt.Sprintf("partition %d: %d acks; %s", p, n, lg.Summary())
			}
		}
		return true, ""
	})
	restartAt := time.Now()
	var gapDuring time.Duration
	for p := int32(0); p < parts; p++ {
		if g, _ := lg.MaxGap(p, stopAt, restartAt); g > gapDuring {
			gapDuring = g
		}
	}
	gapAll, _ := lg.MaxGap(-1, stopAt, restartAt)

	c.Node(x).Restart()
	rejoin := testcluster.WaitFor(t, 60*time.Second, fmt.Sprintf("node %d back in every ISR", x), func() (bool, string) {
		m, err := c.Meta(topic)
		if err != nil {
			return false, err.Error()
		}
		for p, pm := range m {
			if !slices.Contains(pm.ISR, x) {
				return false, fmt.Sprintf("partition %d: %v", p, pm)
			}
		}
		return true, ""
	})
	t.Logf("node %d rejoined every ISR %v after its restart", x, rejoin.Round(time.Millisecond))
	back := time.Now()
	testcluster.WaitFor(t, 30*time.Second, "acks after the rejoin", func() (bool, string) {
		n, _ := lg.AcksSince(back, -1)
		return n >= 500, lg.Summary()
	})
	lg.Stop(30 * time.Second)

	errs := lg.log.snapshot()
	t.Logf("producer: %s", lg.Summary())
	maxGap, maxGapAt := lg.MaxGap(-1, time.Time{}, time.Time{})
	t.Logf("longest gap between any two acks: %v, ending %v after the SIGTERM (node restarted %v after the SIGTERM)", maxGap.Round(time.Millisecond), maxGapAt.Sub(stopAt).Round(time.Millisecond), restartAt.Sub(stopAt).Round(time.Millisecond))
	t.Logf("from SIGTERM to restart: longest gap between acks on one partition %v, on any partition %v", gapDuring.Round(time.Millisecond), gapAll.Round(time.Millisecond))
	t.Logf("producer-side errors (retried by franz-go): %v", errs)
	for name, n := range errs {
		if strings.HasPrefix(name, "NOT_ENOUGH_REPLICAS") {
			t.Errorf("producer got %s %d times during a controlled shutdown", name, n)
		}
	}
	nfailed, _, _ := lg.Failures()
	if nfailed > 0 {
		t.Fatalf("%d records failed", nfailed)
	}
	acked := lg.Acked()
	leos := c.waitReplicasConverged(topic, parts, 60*time.Second)
	read := c.ConsumeAll(topic, parts, 60*time.Second)
	testcluster.CheckAcked(t, "after the controlled shutdown", acked, read)
	var total int64
	for _, l := range leos {
		total += l
	}
	if int64(len(read)) != total {
		t.Errorf("read %d distinct values, but the partitions hold %d records (LEOs %v)", len(read), total, leos)
	}
	t.Logf("verified %d acknowledged records, each once at its offset", len(acked))
}
