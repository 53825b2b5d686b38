package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestCreateTopicsHonoursReplicaAssignment: a CreateTopics request
// with a manual ReplicaAssignment (NumPartitions = ReplicationFactor = -1)
// is accepted, but the partitions are placed automatically; Kafka places
// them exactly as assigned (first replica = preferred leader).
//
// Cause: internal/handler/19_create_topics.go validates
// rt.ReplicaAssignment and then calls h.b.CreateTopic(name, partitions, rf,
// ...) without it, although broker.CreateTopicAssigned and the controller's
// createTopicReq.Assignment exist.
func TestCreateTopicsHonoursReplicaAssignment(t *testing.T) {
	c := startCluster(t, 3, nil)
	const topic = "assigned"
	want := [][]int32{{3, 1, 2}, {2, 3, 1}}
	c.CreateTopic(topic, 0, 0, nil, want)
	md, err := c.Meta(topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, reps := range want {
		got := md[int32(p)]
		if !slices.Equal(got.Replicas, reps) || got.Leader != reps[0] {
			t.Errorf("partition %d: replicas %v leader %d, want replicas %v leader %d (as assigned)", p, got.Replicas, got.Leader, reps, reps[0])
		}
	}
}

// TestControlledShutdownWaitsUntilSurvivorsApplied: SIGTERM of
// the active controller (which also leads partitions) exits before the
// other brokers have applied the leadership changes of its controlled
// shutdown, so right after the process is gone the survivors' Metadata
// still names it leader (leader epoch unchanged, ISR still with it), and
// clients are sent to a dead broker.
//
// Kafka (docs/kafka-replication.md §4.3 step 4, BrokerHeartbeatManager.
// calculateNextBrokerState) grants ShouldShutDown only when the broker leads
// nothing AND every active broker's metadata offset has reached the
// broker's controlled-shutdown offset. sluice's heartbeat handler
// (internal/controller/handlers.go, resp.ShouldShutDown = br.Fenced ||
// (br.ShuttingDown && !leadsAny(im, in.ID))) checks only the first; the
// shutting-down node waits only until it has applied the offset itself.
// When it is the Raft leader, the followers learn the commit index only
// after the next leader's election, so the window is reliably hit.
func TestControlledShutdownWaitsUntilSurvivorsApplied(t *testing.T) {
	c := startCluster(t, 3, nil)
	const topic, parts = "cs-gate", int32(6)
	c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	// The window is racy: try a few rounds, stopping at the first hit.
	for round := 1; round <= 3; round++ {
		if staleAfterControlledShutdown(t, c, topic, round) {
			return
		}
		c.WaitBrokers(3, 60*time.Second)
		c.WaitTopicReady(topic, int(parts), 60*time.Second)
	}
}

// staleAfterControlledShutdown SIGTERMs the active controller, then asks
// the survivors' Metadata at once; it reports (as test errors) partitions
// still led by the stopped node, and restarts it.
func staleAfterControlledShutdown(t *testing.T, c *cluster, topic string, round int) bool {
	t.Helper()
	x, _ := c.activeController()
	md, err := c.Meta(topic)
	if err != nil {
		t.Fatal(err)
	}
	var led []int32
	for p, m := range md {
		if m.Leader == x {
			led = append(led, p)
		}
	}
	if len(led) == 0 {
		t.Fatalf("active controller %d leads no partition: %v", x, md)
	}
	c.Node(x).Stop() // SIGTERM: controlled shutdown; returns once the process exited
	exited := time.Now()
	type seen struct {
		node int32
		m    map[int32]testcluster.PartitionMeta
		err  error
	}
	ch := make(chan seen, 3)
	n := 0
	for _, p := range c.Nodes() {
		if int32(p.NodeID()) == x {
			continue
		}
		n++
		go func(id int32, addr string) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			m, err := testcluster.PartitionsFrom(ctx, addr, topic)
			ch <- seen{id, m, err}
		}(int32(p.NodeID()), p.Addr())
	}
	stale := false
	for range n {
		s := <-ch
		if s.err != nil {
			t.Fatalf("node %d: %v", s.node, s.err)
		}
		for _, p := range led {
			if pm := s.m[p]; pm.Leader == x || slices.Contains(pm.ISR, x) {
				stale = true
				t.Errorf("round %d: right after node %d's controlled shutdown completed, node %d's Metadata for partition %d: %v (want another leader, %d out of the ISR)", round, x, s.node, p, pm, x)
			}
		}
	}
	moved := testcluster.WaitFor(t, 20*time.Second, "survivors see the moved leaderships", func() (bool, string) {
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
	t.Logf("round %d: node %d (active controller, leader of %v) stopped; survivors showed the moves %v after it exited (stale at once: %v)", round, x, led, (time.Since(exited) - 0*moved).Round(time.Millisecond), stale)
	c.Node(x).Restart()
	return stale
}
