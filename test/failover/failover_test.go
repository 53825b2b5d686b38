// Package failover measures how long a partition is unwritable after its
// leader is SIGKILLed, on a real three-process cluster with default
// liveness settings (broker.session.timeout.ms, broker.heartbeat.interval.ms
// and the raft timeouts are not touched), and checks that a cluster under
// load with no faults, or with a broker paused for less than its session,
// changes no partition leader (docs/controller.md, "Failover").
//
// Run: go test ./test/failover/ -v -count=1        (CI: 3 kills, a 30 s quiet run)
//
//	go test ./test/failover/ -v -count=1 -run Sigkill -failover.kills 30 -timeout 30m
//	go test ./test/failover/ -v -count=1 -run Quiet -failover.quiet 10m -timeout 20m
//
// SLUICE_BIN=/path/to/sluice runs the same measurement against another
// build (testproc.BuildBinary), e.g. an older commit for a before/after.
package failover

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

var (
	kills     = flag.Int("failover.kills", 3, "SIGKILLs of a partition leader in TestSigkillFailover")
	maxGap    = flag.Duration("failover.max", 6*time.Second, "TestSigkillFailover fails if any kill's longest gap between acknowledgements exceeds this")
	quietTime = flag.Duration("failover.quiet", 30*time.Second, "length of TestQuietUnderLoad's run")
)

func TestMain(m *testing.M) { testproc.Main(m) }

// props are the only settings the clusters get: the topic-level defaults
// that make the tests' topics RF 3 with min.insync.replicas 2. Every
// liveness setting keeps its default.
var props = map[string]string{
	"default.replication.factor": "3",
	"min.insync.replicas":        "2",
}

const topic = "failover"

// activeController asks the running nodes' /api/v1/node which node is the
// active controller (0 if none answers).
func activeController(c *testcluster.Cluster) int32 {
	cl := &http.Client{Timeout: time.Second}
	for _, p := range c.Nodes() {
		if !c.Up(p) {
			continue
		}
		resp, err := cl.Get("http://" + p.HTTPAddr() + "/api/v1/node")
		if err != nil {
			continue
		}
		var v struct {
			Controller int32 `json:"controller"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err == nil && v.Controller > 0 {
			return v.Controller
		}
	}
	return 0
}

// waitHealed waits until every running node's Metadata shows every
// partition with the same leader and leader epoch and all three replicas
// in its ISR, and returns that view (a restarted node answers from an
// older image until it catches up, so one node's answer is not enough).
func waitHealed(t *testing.T, c *testcluster.Cluster, parts int32, timeout time.Duration) map[int32]testcluster.PartitionMeta {
	t.Helper()
	return waitHealedTopic(t, c, topic, parts, timeout)
}

// waitHealedTopic is waitHealed for another topic.
func waitHealedTopic(t *testing.T, c *testcluster.Cluster, topic string, parts int32, timeout time.Duration) map[int32]testcluster.PartitionMeta {
	t.Helper()
	var agreed map[int32]testcluster.PartitionMeta
	testcluster.WaitFor(t, timeout, "every partition led, the same leader on every node, every ISR full", func() (bool, string) {
		all, err := c.MetaAll(topic)
		if err != nil {
			return false, err.Error()
		}
		agreed = nil
		for id, m := range all {
			for p := int32(0); p < parts; p++ {
				if m[p].Leader < 0 || len(m[p].ISR) != 3 {
					return false, fmt.Sprintf("node %d: partition %d %v", id, p, m[p])
				}
				if agreed != nil && (agreed[p].Leader != m[p].Leader || agreed[p].LeaderEpoch != m[p].LeaderEpoch) {
					return false, fmt.Sprintf("node %d: partition %d %v, another node: %v", id, p, m[p], agreed[p])
				}
			}
			if agreed == nil {
				agreed = m
			}
		}
		return true, ""
	})
	return agreed
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// TestSigkillFailover SIGKILLs the leader of a partition -failover.kills
// times under an idempotent acks=all producer (RF 3, min.insync.replicas
// 2), restarting it and waiting for every ISR to heal before the next
// kill, and reports the longest gap between two acknowledgements of that
// partition around each kill (p50, p99, max). Every node is a voter;
// every third kill takes the leader that is also the active controller.
func TestSigkillFailover(t *testing.T) {
	const parts = int32(3)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
	c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	lg := c.StartLoad(topic, testcluster.LoadOptions{Partitions: []int32{0, 1, 2}, Rate: 600})
	defer lg.Abort()

	type result struct {
		victim     int32
		controller bool
		gap        time.Duration
	}
	var results []result
	for i := range *kills {
		waitHealed(t, c, parts, 2*time.Minute)
		time.Sleep(2 * time.Second) // steady acknowledgements before the kill
		md := waitHealed(t, c, parts, time.Minute)
		// Every third kill takes the partition the active controller
		// leads (if it leads one), the others one it does not.
		ctl := activeController(c)
		part := int32(0)
		for p := range parts {
			if (md[p].Leader == ctl) == (i%3 == 2) {
				part = p
				break
			}
		}
		victim := md[part].Leader
		if n, _ := lg.AcksSince(time.Now().Add(-time.Second), part); n == 0 {
			t.Fatalf("kill %d: no acknowledgement of partition %d in the last second before the kill; %s", i+1, part, lg.Summary())
		}
		killedAt := time.Now()
		c.Node(victim).Kill()
		testcluster.WaitFor(t, 60*time.Second, "an acknowledgement after the kill", func() (bool, string) {
			n, _ := lg.AcksSince(killedAt, part)
			return n > 0, lg.Summary()
		})
		time.Sleep(time.Second) // let acknowledgements resume on every partition
		gap, _ := lg.MaxGap(part, killedAt, time.Now())
		r := result{victim: victim, controller: victim == ctl, gap: gap}
		results = append(results, r)
		t.Logf("kill %d/%d: node %d, leader of partition %d (active controller: %v): longest gap between its acks: %v",
			i+1, *kills, victim, part, r.controller, gap.Round(time.Millisecond))
		c.Node(victim).Restart()
	}
	waitHealed(t, c, parts, 2*time.Minute)
	lg.Stop(60 * time.Second)
	if n, v, err := lg.Failures(); n > 0 {
		t.Errorf("%d records failed, e.g. %s: %v", n, v, err)
	}
	testcluster.CheckAcked(t, "after the kills", lg.Acked(), c.ConsumeAll(topic, parts, 2*time.Minute))

	var all, ctlGaps, brkGaps []time.Duration
	for _, r := range results {
		all = append(all, r.gap)
		if r.controller {
			ctlGaps = append(ctlGaps, r.gap)
		} else {
			brkGaps = append(brkGaps, r.gap)
		}
	}
	summary := func(name string, d []time.Duration) string {
		slices.Sort(d)
		if len(d) == 0 {
			return fmt.Sprintf("%s: none", name)
		}
		return fmt.Sprintf("%s: %d kills, p50 %v, p99 %v, max %v", name, len(d),
			percentile(d, 0.5).Round(time.Millisecond), percentile(d, 0.99).Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	var sb strings.Builder
	fmt.Fprintln(&sb, "FAILOVER (longest gap between acknowledgements of a partition per SIGKILL of its leader):")
	fmt.Fprintln(&sb, "  "+summary("all", all))
	fmt.Fprintln(&sb, "  "+summary("leader was also the active controller", ctlGaps))
	fmt.Fprintln(&sb, "  "+summary("leader was not the active controller", brkGaps))
	t.Log(sb.String())
	if slices.Max(all) > *maxGap {
		t.Errorf("a kill left its partition without acknowledgements for %v (limit %v)", slices.Max(all).Round(time.Millisecond), *maxGap)
	}
}
