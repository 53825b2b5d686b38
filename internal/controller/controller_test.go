package controller

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// Three voters and a broker-only node; a topic created through a node
// that is not the active controller appears identically everywhere.
func TestQuorumCreateTopic(t *testing.T) {
	c := newCluster(t, 3, 1, nil)
	via := c.follower()
	var mu sync.Mutex
	var watched []int64
	sawT1 := false
	c.nodes[4].Watch(func(im *metadata.Image) {
		mu.Lock()
		watched = append(watched, im.Offset)
		sawT1 = sawT1 || im.Topics["t1"] != nil
		mu.Unlock()
	})
	if err := via.CreateTopic(ctxT(t), "t1", 4, 3, nil, map[string]string{"retention.ms": "1000"}, false); err != nil {
		t.Fatal(err)
	}
	// The call returns once the caller has applied it.
	if via.Image().Topics["t1"] == nil {
		t.Fatal("topic not applied on the calling node")
	}
	nb := c.nodes[4]
	if err := nb.CreateTopic(ctxT(t), "t2", -1, -1, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	if nb.Image().Topics["t2"] == nil {
		t.Fatal("topic not applied on the broker-only node")
	}
	im := c.converged()
	waitFor(t, 5*time.Second, "watch callback", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return sawT1
	})
	mu.Lock()
	for i := 1; i < len(watched); i++ {
		if watched[i] <= watched[i-1] {
			t.Fatalf("watch offsets out of order: %v", watched)
		}
	}
	mu.Unlock()
	top := im.Topics["t1"]
	if top == nil || len(top.Partitions) != 4 || top.Configs["retention.ms"] != "1000" {
		t.Fatalf("bad topic %+v", top)
	}
	leaders := map[int32]bool{}
	for _, p := range top.Partitions {
		if len(p.Replicas) != 3 || p.Leader != p.Replicas[0] || p.LeaderEpoch != 0 || p.PartitionEpoch != 0 || len(p.ISR) != 3 {
			t.Fatalf("bad partition %+v", p)
		}
		leaders[p.Leader] = true
	}
	if len(leaders) != 4 {
		t.Fatalf("leaders not spread over the 4 brokers: %v", top.Partitions)
	}
	if len(im.Brokers) != 4 || im.ClusterID == "" {
		t.Fatalf("brokers %v cluster %q", im.Brokers, im.ClusterID)
	}
	for id, b := range im.Brokers {
		if b.Fenced || b.Epoch <= 0 || int(b.Port) != c.ports[id] {
			t.Fatalf("broker %d: %+v", id, b)
		}
	}
	// Errors come back as Kafka codes.
	err := via.CreateTopic(ctxT(t), "t1", 1, 1, nil, nil, false)
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := via.CreateTopic(ctxT(t), "t3", 1, 5, nil, nil, false); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf 5: %v", err)
	}
	if err := via.CreateTopic(ctxT(t), "t3", 1, -1, [][]int32{{1, 9}}, nil, false); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("bad assignment: %v", err)
	}
	if err := via.CreateTopic(ctxT(t), "bad/name", 1, 1, nil, nil, false); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("bad name: %v", err)
	}
	if err := via.CreateTopic(ctxT(t), "t3", 1, 1, nil, map[string]string{"nope": "1"}, false); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
	if err := via.CreatePartitions(ctxT(t), "t2", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := via.AlterTopicConfigs(ctxT(t), "t2", []metadata.ConfigOp{{Name: "cleanup.policy", Op: 0, Value: "compact"}}, false); err != nil {
		t.Fatal(err)
	}
	if err := nb.DeleteTopic(ctxT(t), "t1"); err != nil {
		t.Fatal(err)
	}
	im = c.converged()
	if im.Topics["t1"] != nil || len(im.Topics["t2"].Partitions) != 3 || im.Topics["t2"].Configs["cleanup.policy"] != "compact" {
		t.Fatalf("image after changes: %+v", im.Topics)
	}
}

// Closing the active controller elects another; writes keep working; the
// closed node restarts on its data and catches up.
func TestFailoverAndRestart(t *testing.T) {
	c := newCluster(t, 3, 1, nil)
	if err := c.follower().CreateTopic(ctxT(t), "a", 3, 3, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	old := c.active()
	oldID := c.id(old)
	start := time.Now()
	c.stop(oldID)
	t.Logf("closed active controller %d in %v", oldID, time.Since(start))
	act := c.active()
	if c.id(act) == oldID {
		t.Fatal("closed node still active")
	}
	for _, n := range c.nodes {
		if err := n.CreateTopic(ctxT(t), "b"+string(rune('0'+c.id(n))), 2, 2, nil, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	n := c.start(oldID)
	if err := n.WaitReady(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	im := c.converged()
	if len(im.Topics) != 4 {
		t.Fatalf("topics %v", im.TopicNames())
	}
}

func part(im *metadata.Image, topic string, i int) metadata.Partition {
	return im.Topics[topic].Partitions[i]
}

// A node that stops heartbeating is fenced after the session timeout: it
// leaves every ISR, its leaderships move (leader epoch bumped), partitions
// where it was the last ISR member go offline unless unclean election is
// enabled for the topic.
func TestFencing(t *testing.T) {
	c := newCluster(t, 3, 0, map[string]string{"leader.imbalance.check.interval.seconds": "1"})
	act := c.active()
	v := c.id(c.follower()) // the victim
	var o1, o2 int32
	for id := range c.nodes {
		if id != v {
			if o1 == 0 {
				o1 = id
			} else {
				o2 = id
			}
		}
	}
	ctx := ctxT(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(act.CreateTopic(ctx, "f", -1, -1, [][]int32{{v, o1, o2}, {o1, v, o2}}, nil, false))
	must(act.CreateTopic(ctx, "g", -1, -1, [][]int32{{v, o1}}, nil, false))
	must(act.CreateTopic(ctx, "u", -1, -1, [][]int32{{v, o1}}, map[string]string{"unclean.leader.election.enable": "true"}, false))
	// Shrink g-0 and u-0 to {v} through the leader v.
	c.converged()
	vn := c.nodes[v]
	for _, tp := range []string{"g", "u"} {
		i := 0
		p := part(vn.Image(), tp, i)
		resp, err := vn.AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: tp, Partition: int32(i), BrokerID: v, BrokerEpoch: vn.BrokerEpoch(), LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{v}})
		must(err)
		if resp.Error != 0 || len(resp.ISR) != 1 {
			t.Fatalf("shrink %s: %+v", tp, resp)
		}
	}
	before := c.converged()
	start := time.Now()
	c.stop(v)
	on := c.nodes[o1]
	waitFor(t, 10*time.Second, "victim fenced", func() bool { return on.Image().Brokers[v].Fenced })
	t.Logf("fenced after %v", time.Since(start))
	im := c.converged()
	p0, p1, p2, u0 := part(im, "f", 0), part(im, "f", 1), part(im, "g", 0), part(im, "u", 0)
	if p0.Leader != o1 || p0.LeaderEpoch != part(before, "f", 0).LeaderEpoch+1 || has(p0.ISR, v) {
		t.Fatalf("f-0 after fence: %+v", p0)
	}
	if p1.Leader != o1 || p1.LeaderEpoch != 0 || has(p1.ISR, v) || p1.PartitionEpoch != 1 {
		t.Fatalf("f-1 after fence: %+v", p1)
	}
	if p2.Leader != -1 || len(p2.ISR) != 0 || !slices.Equal(p2.ELR, []int32{v}) || !slices.Equal(p2.LastKnownELR, []int32{v}) {
		t.Fatalf("g-0 (last ISR member fenced) must go offline with an empty ISR, the member in its ELR (KIP-966): %+v", p2)
	}
	if u0.Leader != o1 || len(u0.ISR) != 1 || u0.ISR[0] != o1 || !u0.Recovering {
		t.Fatalf("u-0 unclean election: %+v", u0)
	}
	// The leader of u-0 may not grow the ISR while recovering; a fenced
	// replica is ineligible.
	onEpoch := on.BrokerEpoch()
	resp, err := on.AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: "f", Partition: 0, BrokerID: o1, BrokerEpoch: onEpoch, LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, NewISR: []int32{o1, o2, v}})
	must(err)
	if resp.Error != kerr.IneligibleReplica.Code {
		t.Fatalf("fenced member: %+v", resp)
	}
	// The victim restarts (new incarnation), unfences, and g-0 comes back.
	c.start(v)
	must(c.nodes[v].WaitReady(ctx))
	waitFor(t, 10*time.Second, "g-0 back online", func() bool { return part(on.Image(), "g", 0).Leader == v })
	// o1 (leader of f-0) takes v back into the ISR; the preferred-leader
	// rebalance then moves leadership back to v (replicas[0]).
	p0 = part(on.Image(), "f", 0)
	resp, err = on.AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: "f", Partition: 0, BrokerID: o1, BrokerEpoch: onEpoch, LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, NewISR: []int32{o1, o2, v}})
	if err != nil || resp.Error != 0 {
		t.Fatalf("expand with v: %+v %v", resp, err)
	}
	waitFor(t, 5*time.Second, "preferred leader back", func() bool {
		p := part(on.Image(), "f", 0)
		return p.Leader == v && p.LeaderEpoch == p0.LeaderEpoch+1
	})
}

func TestAlterPartitionCAS(t *testing.T) {
	c := newCluster(t, 3, 0, nil)
	act := c.active()
	ids := []int32{1, 2, 3}
	if err := act.CreateTopic(ctxT(t), "cas", -1, -1, [][]int32{ids}, nil, false); err != nil {
		t.Fatal(err)
	}
	leader := c.nodes[1]
	ctx := ctxT(t)
	req := func(from int32, le, pe int32, isr ...int32) metadata.AlterPartitionResponse {
		t.Helper()
		n := c.nodes[from]
		resp, err := n.AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: "cas", BrokerID: from, BrokerEpoch: n.BrokerEpoch(), LeaderEpoch: le, PartitionEpoch: pe, NewISR: isr})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Valid shrink: partition epoch bumps, leader epoch does not.
	r := req(1, 0, 0, 1, 2)
	if r.Error != 0 || r.PartitionEpoch != 1 || r.LeaderEpoch != 0 || len(r.ISR) != 2 {
		t.Fatalf("shrink: %+v", r)
	}
	if p := part(leader.Image(), "cas", 0); p.PartitionEpoch != 1 || len(p.ISR) != 2 {
		t.Fatalf("caller's image after shrink: %+v", p)
	}
	off := leader.Image().Offset
	// Identical proposal: success without a write.
	if r := req(1, 0, 1, 2, 1); r.Error != 0 || r.PartitionEpoch != 1 {
		t.Fatalf("identical: %+v", r)
	}
	if got := leader.Image().Offset; got != off {
		t.Fatalf("identical proposal wrote an entry (%d -> %d)", off, got)
	}
	checks := []struct {
		name   string
		r      metadata.AlterPartitionResponse
		expect *kerr.Error
	}{
		{"stale partition epoch", req(1, 0, 0, 1, 2, 3), kerr.InvalidUpdateVersion},
		{"stale leader epoch", req(1, -1, 1, 1, 2, 3), kerr.FencedLeaderEpoch},
		{"newer epoch", req(1, 1, 1, 1, 2, 3), kerr.NotController},
		{"not the leader", req(2, 0, 1, 1, 2, 3), kerr.InvalidRequest},
		{"leader missing", req(1, 0, 1, 2, 3), kerr.InvalidRequest},
		{"not a replica", req(1, 0, 1, 1, 7), kerr.InvalidRequest},
	}
	for _, ch := range checks {
		if ch.r.Error != ch.expect.Code {
			t.Errorf("%s: got %d want %s", ch.name, ch.r.Error, ch.expect.Message)
		}
	}
	n1 := c.nodes[1]
	resp, err := n1.AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: "cas", BrokerID: 1, BrokerEpoch: n1.BrokerEpoch() - 1, LeaderEpoch: 0, PartitionEpoch: 1, NewISR: []int32{1, 2, 3}})
	if err != nil || resp.Error != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale broker epoch: %+v %v", resp, err)
	}
	_, err = n1.cli.call(ctx, opHeartbeat, heartbeatReq{ID: 1, Epoch: n1.BrokerEpoch() - 1, Offset: 1 << 40}, &heartbeatResp{}, 0)
	if !errors.Is(err, kerr.StaleBrokerEpoch) {
		t.Fatalf("stale heartbeat: %v", err)
	}
	resp, err = n1.AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: "cas", BrokerID: 1, BrokerEpoch: n1.BrokerEpoch(), LeaderEpoch: 0, PartitionEpoch: 1, NewISR: []int32{1, 2, 3}, ISRBrokerEpochs: []int64{-1, -1, 1}})
	if err != nil || resp.Error != kerr.IneligibleReplica.Code {
		t.Fatalf("member epoch mismatch: %+v %v", resp, err)
	}
	// Valid expand.
	r = req(1, 0, 1, 1, 2, 3)
	if r.Error != 0 || r.PartitionEpoch != 2 || r.LeaderEpoch != 0 || len(r.ISR) != 3 {
		t.Fatalf("expand: %+v", r)
	}
	if im := c.converged(); part(im, "cas", 0).PartitionEpoch != 2 {
		t.Fatalf("converged: %+v", part(im, "cas", 0))
	}
}

// Controlled shutdown moves leadership away, takes the broker out of the
// ISRs and returns; a restart makes the broker active again.
func TestControlledShutdown(t *testing.T) {
	c := newCluster(t, 3, 0, nil)
	v := c.id(c.follower())
	act := c.active()
	var others []int32
	for id := range c.nodes {
		if id != v {
			others = append(others, id)
		}
	}
	if err := act.CreateTopic(ctxT(t), "cs", -1, -1, [][]int32{{v, others[0], others[1]}, {v, others[1], others[0]}, {others[0], v, others[1]}}, nil, false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.nodes[v].ControlledShutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("controlled shutdown granted in %v", time.Since(start))
	im := c.nodes[v].Image()
	if !im.Brokers[v].ShuttingDown {
		t.Fatalf("broker not shutting down: %+v", im.Brokers[v])
	}
	for i, p := range im.Topics["cs"].Partitions {
		if p.Leader == v || has(p.ISR, v) || p.Leader == -1 {
			t.Fatalf("cs-%d after controlled shutdown: %+v", i, p)
		}
	}
	if p := part(im, "cs", 0); p.LeaderEpoch != 1 {
		t.Fatalf("leader epoch not bumped: %+v", p)
	}
	c.stop(v)
	n := c.start(v)
	if err := n.WaitReady(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if b := n.Image().Brokers[v]; b.ShuttingDown || b.Fenced {
		t.Fatalf("restarted broker: %+v", b)
	}
}

// Restarting every voter brings back topics, configs and the producer-id
// counter; producer ids never repeat.
func TestRestartAllAndProducerIDs(t *testing.T) {
	c := newCluster(t, 3, 0, nil)
	seen := map[int64]bool{}
	alloc := func(k int) {
		t.Helper()
		for id, n := range c.nodes {
			for i := 0; i < k; i++ {
				pid, err := n.AllocateProducerID(ctxT(t))
				if err != nil {
					t.Fatal(err)
				}
				if seen[pid] {
					t.Fatalf("producer id %d handed out twice (node %d)", pid, id)
				}
				seen[pid] = true
			}
		}
	}
	alloc(3)
	n := c.follower()
	if err := n.CreateTopic(ctxT(t), "keep", 2, 3, nil, map[string]string{"min.insync.replicas": "2"}, false); err != nil {
		t.Fatal(err)
	}
	before := c.converged()
	c.closeAll()
	for _, v := range c.voters {
		c.start(v.ID)
	}
	c.waitReady()
	after := c.converged()
	if after.ClusterID != before.ClusterID || after.NextProducerID != before.NextProducerID {
		t.Fatalf("cluster id / producer counter: %q %d -> %q %d", before.ClusterID, before.NextProducerID, after.ClusterID, after.NextProducerID)
	}
	if k := after.Topics["keep"]; k == nil || k.Configs["min.insync.replicas"] != "2" || k.ID != before.Topics["keep"].ID {
		t.Fatalf("topic after restart: %+v", k)
	}
	alloc(3)
	// Failover keeps the counter too.
	c.stop(c.id(c.active()))
	alloc(2)
}

// A forced snapshot compacts the log; a restart restores the image from it.
func TestSnapshotRestore(t *testing.T) {
	cl := newClusterSnap(t, 8)
	for i := 0; i < 12; i++ {
		if err := cl.active().CreateTopic(ctxT(t), "s"+string(rune('a'+i)), 1, 2, nil, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	before := cl.converged()
	for id, n := range cl.nodes {
		if err := n.Snapshot(); err != nil {
			t.Fatalf("snapshot on %d: %v", id, err)
		}
		first, _ := n.store.FirstIndex()
		if first <= 1 {
			t.Fatalf("node %d: log not compacted (first index %d)", id, first)
		}
	}
	cl.closeAll()
	for _, v := range cl.voters {
		cl.start(v.ID)
	}
	cl.waitReady()
	after := cl.converged()
	if len(after.Topics) != 12 || after.Offset <= before.Offset {
		t.Fatalf("after restore: %d topics, offset %d (before %d)", len(after.Topics), after.Offset, before.Offset)
	}
}

// Close ends every goroutine the nodes started.
func TestCloseNoLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	c := newCluster(t, 3, 1, nil)
	if err := c.nodes[4].CreateTopic(ctxT(t), "x", 3, 3, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.closeAll()
	t.Logf("closed 4 nodes in %v", time.Since(start))
	waitFor(t, 5*time.Second, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= base+2 })
}
