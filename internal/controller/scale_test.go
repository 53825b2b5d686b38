package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// statsDelta is what the active controller committed between two reads
// (the maxima are over the node's life).
func statsDelta(before, after Stats) Stats {
	return Stats{Entries: after.Entries - before.Entries, Records: after.Records - before.Records,
		Bytes: after.Bytes - before.Bytes, MaxEntryBytes: after.MaxEntryBytes, MaxEntryRecords: after.MaxEntryRecords}
}

func (s Stats) String() string {
	return fmt.Sprintf("%d entries, %d records, %d bytes (largest entry %d bytes, %d records)", s.Entries, s.Records, s.Bytes, s.MaxEntryBytes, s.MaxEntryRecords)
}

// clusterStats sums what every running node but those in except
// committed as the active controller: a leader change splits a step's
// entries between two.
func clusterStats(c *cluster, except ...int32) Stats {
	var sum Stats
	for id, n := range c.nodes {
		if slices.Contains(except, id) {
			continue
		}
		s := n.Stats()
		sum.Entries += s.Entries
		sum.Records += s.Records
		sum.Bytes += s.Bytes
		sum.MaxEntryBytes = max(sum.MaxEntryBytes, s.MaxEntryBytes)
		sum.MaxEntryRecords = max(sum.MaxEntryRecords, s.MaxEntryRecords)
	}
	return sum
}

// createBig creates topic with 10,000 partitions at the active
// controller. A create committed just before a controller failover and
// retried is answered TOPIC_ALREADY_EXISTS: the topic is then checked.
func createBig(t *testing.T, c *cluster, topic string) {
	t.Helper()
	err := c.active().CreateTopic(ctxT(t), topic, 10000, 3, nil, nil, false)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		if tp := c.active().Image().Topics[topic]; tp != nil && len(tp.Partitions) == 10000 {
			return
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Creating 10,000 partitions, fencing a broker in 20,000 ISRs and bringing
// it back into them take a handful of raft entries, each bounded. Before
// batching (go test -run TestScaleCreateAndFence -v on the commit before
// it): the create was 1 entry of 1 record (939 kB), the fence 1 entry of
// 10,001 records (819 kB) for 10,000 partitions, and the 10,000
// AlterPartitions 10,000 entries over about 110 s. The cluster runs with a
// 2 s raft timeout and a 6 s broker session, and the counts are summed over
// the controllers, so that a loaded machine (a leader election, a broker
// session lapsing while 10,000 partitions are applied) changes no count;
// the waits are polls with generous deadlines.
func TestScaleCreateAndFence(t *testing.T) {
	c := newClusterRaft(t, 3, 0, map[string]string{
		"broker.session.timeout.ms":    "6000",
		"broker.heartbeat.interval.ms": "500",
	}, 2*time.Second)
	s0 := clusterStats(c)
	t0 := time.Now()
	createBig(t, c, "big0")
	cr := statsDelta(s0, clusterStats(c))
	t.Logf("create 10,000 partitions: %v in %v", cr, time.Since(t0))
	if cr.Entries != 1 || cr.Records > 10 || cr.MaxEntryBytes > 2<<20 {
		t.Fatalf("create 10,000 partitions: %v; want 1 entry of at most 10 records and 2 MiB", cr)
	}
	createBig(t, c, "big1")
	victim := c.follower()
	vid := c.id(victim)
	s1 := clusterStats(c, vid) // the victim's counts go with it
	t1 := time.Now()
	c.stop(vid)
	waitFor(t, time.Minute, "the stopped broker fenced and out of every ISR", func() bool {
		im := c.active().Image()
		if !im.Brokers[vid].Fenced {
			return false
		}
		for _, name := range []string{"big0", "big1"} {
			for _, p := range im.Topics[name].Partitions {
				if p.Leader == vid || has(p.ISR, vid) || p.Leader == noLeader {
					return false
				}
			}
		}
		return true
	})
	// The counters are bumped once an entry's commit returns, which may
	// be just after its records reached the image.
	waitFor(t, 30*time.Second, "the fence's entries counted", func() bool {
		return statsDelta(s1, clusterStats(c)).Records >= 20001
	})
	fe := statsDelta(s1, clusterStats(c))
	t.Logf("fence a broker in 20,000 ISRs: %v, %v after the stop", fe, time.Since(t1))
	if fe.Entries < 3 || fe.Entries > 4 || fe.Records != 20001 || fe.MaxEntryRecords > maxEntryWeight {
		t.Fatalf("fence: %v; want 20,001 records in 3 or 4 entries of at most %d", fe, maxEntryWeight)
	}
	s2 := clusterStats(c)
	took := rejoin(t, c, vid, "big0")
	rj := statsDelta(s2, clusterStats(c))
	t.Logf("10,000 AlterPartitions bringing it back: %v in %v", rj, took)
	if rj.Entries > 50 {
		t.Fatalf("10,000 AlterPartitions took %d entries; want them batched into at most 50", rj.Entries)
	}
}

// rejoin restarts id and has every partition's leader propose the ISR
// with id back, all at once (as brokers do: one AlterPartition in flight
// per partition), returning the time until every ISR has it.
func rejoin(t *testing.T, c *cluster, id int32, topic string) time.Duration {
	t.Helper()
	n := c.start(id)
	if err := n.WaitReady(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	im := n.Image()
	var wg sync.WaitGroup
	errs := make(chan error, len(im.Topics[topic].Partitions))
	for _, p := range im.Topics[topic].Partitions {
		ldr := c.nodes[p.Leader]
		req := metadata.AlterPartitionRequest{Topic: topic, Partition: p.Index, BrokerID: p.Leader, BrokerEpoch: im.Brokers[p.Leader].Epoch,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(append([]int32(nil), p.ISR...), id)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			resp, err := ldr.AlterPartition(ctx, req)
			if err == nil && resp.Error != 0 {
				err = kerr.ErrorForCode(resp.Error)
			}
			// A proposal committed just before a controller failover
			// is answered NOT_CONTROLLER and then, retried,
			// INVALID_UPDATE_VERSION (docs/controller.md); the final
			// state is checked below.
			if err != nil && !errors.Is(err, kerr.InvalidUpdateVersion) {
				errs <- fmt.Errorf("partition %d: %w", p.Index, err)
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	close(errs)
	for err := range errs {
		t.Fatalf("alter partition: %v", err)
	}
	waitFor(t, 10*time.Second, "every ISR with the restarted broker", func() bool {
		for _, p := range c.active().Image().Topics[topic].Partitions {
			if !has(p.ISR, id) {
				return false
			}
		}
		return true
	})
	return took
}

// KIP-578's limits and the per-request bound refuse a request whole,
// before placement, and write nothing.
func TestPartitionLimits(t *testing.T) {
	c := newCluster(t, 3, 0, map[string]string{"max.broker.partitions": "100", "max.partitions": "150"})
	act := c.active()
	ctx := ctxT(t)
	s0 := act.Stats()
	t0 := time.Now()
	err := act.CreateTopic(ctx, "huge", 1000000, 3, nil, nil, false)
	if !errors.Is(err, kerr.PolicyViolation) || !strings.Contains(err.Error(), "Excessively large number of partitions per request") {
		t.Fatalf("a million partitions: %v; want POLICY_VIOLATION, Excessively large number of partitions per request", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("refusing a million partitions took %v", d)
	}
	if err := act.CreateTopic(ctx, "a", 90, 3, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	// 20 more replicas on each broker: 110 > 100.
	err = act.CreateTopic(ctx, "b", 20, 3, nil, nil, false)
	if !errors.Is(err, kerr.PolicyViolation) || !strings.Contains(err.Error(), "max.broker.partitions=100") {
		t.Fatalf("over max.broker.partitions: %v", err)
	}
	err = act.CreatePartitions(ctx, "a", 101, nil, false)
	if !errors.Is(err, kerr.PolicyViolation) || !strings.Contains(err.Error(), "max.broker.partitions=100") {
		t.Fatalf("CreatePartitions over max.broker.partitions: %v", err)
	}
	// Validate-only requests are checked the same way.
	if err := act.CreateTopic(ctx, "b", 20, 3, nil, nil, true); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("validate-only over the limit: %v", err)
	}
	if err := act.CreatePartitions(ctx, "a", 100, nil, false); err != nil {
		t.Fatal(err)
	}
	// RF 1 fits nowhere either: every broker holds 100.
	if err := act.CreateTopic(ctx, "c", 1, 1, nil, nil, false); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("every broker full: %v", err)
	}
	if err := act.CreateTopic(ctx, "d", 1, 1, [][]int32{{2}}, nil, false); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("manual assignment onto a full broker: %v", err)
	}
	im := c.converged()
	if len(im.Topics) != 1 || len(im.Topics["a"].Partitions) != 100 {
		t.Fatalf("topics after refusals: %v", im.TopicNames())
	}
	if n := metadata.ReplicaCounts(im); n[1] != 100 || n[2] != 100 || n[3] != 100 {
		t.Fatalf("replicas per broker %v", n)
	}
	if d := statsDelta(s0, act.Stats()); d.Entries != 2 {
		t.Fatalf("%v; want only the two successful creations written", d)
	}
}

// Placement skips a broker at max.broker.partitions (KIP-578) rather than
// refusing while others have room; max.partitions bounds the cluster.
func TestPlacementAvoidsFullBroker(t *testing.T) {
	c := newCluster(t, 3, 0, map[string]string{"max.broker.partitions": "10", "max.partitions": "25"})
	act := c.active()
	ctx := ctxT(t)
	full := make([][]int32, 10)
	for i := range full {
		full[i] = []int32{1}
	}
	if err := act.CreateTopic(ctx, "on1", -1, -1, full, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := act.CreateTopic(ctx, "spread", 6, 2, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range act.Image().Topics["spread"].Partitions {
		if has(p.Replicas, 1) {
			t.Fatalf("partition %d placed on the full broker 1: %v", p.Index, p.Replicas)
		}
	}
	err := act.CreateTopic(ctx, "over", 10, 1, nil, nil, false)
	if !errors.Is(err, kerr.PolicyViolation) || !strings.Contains(err.Error(), "max.partitions=25") {
		t.Fatalf("over max.partitions: %v", err)
	}
}

// Administrative requests beyond maxQueuedAdmin are refused with
// THROTTLING_QUOTA_EXCEEDED while the controller is busy; those queued
// complete; heartbeats and AlterPartitions are not counted.
func TestAdminQueueBounded(t *testing.T) {
	c := newCluster(t, 1, 0, nil)
	act := c.active()
	a := &act.act
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // a failed test still lets the controller stop
	held := make(chan struct{})
	go a.decide(context.Background(), func(*metadata.Image, *batch) error {
		close(held)
		<-hold
		return nil
	})
	<-held
	const n = maxQueuedAdmin + 44
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := a.createTopic(context.Background(), []byte(fmt.Sprintf(`{"name":"t%d","partitions":1,"rf":1}`, i)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				codes["ok"]++
			case errors.Is(err, kerr.ThrottlingQuotaExceeded):
				codes["throttled"]++
			default:
				codes[err.Error()]++
			}
		}()
	}
	// Every admitted request is in the decision queue (the loop is held,
	// so nothing leaves it), and the admin count is at its bound.
	waitFor(t, 10*time.Second, "the admin queue full", func() bool {
		return a.q.admin.Load() == maxQueuedAdmin && len(a.q.ch) == maxQueuedAdmin
	})
	// A heartbeat-like decision still gets in: a refusal would come back
	// at once; admitted, it is queued behind the admin requests (the
	// queue's length, with the loop still held, shows it) and is made
	// once the hold is released.
	res := make(chan error, 1)
	go func() {
		_, err := a.decide(ctxT(t), func(*metadata.Image, *batch) error { return nil })
		res <- err
	}()
	waitFor(t, 10*time.Second, "the heartbeat-like decision queued", func() bool {
		select {
		case err := <-res:
			t.Fatalf("a heartbeat-like decision answered while the loop was held: %v", err)
		default:
		}
		return len(a.q.ch) == maxQueuedAdmin+1
	})
	if n := a.q.admin.Load(); n != maxQueuedAdmin {
		t.Fatalf("admin count %d with the heartbeat-like decision queued, want %d", n, maxQueuedAdmin)
	}
	release()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if codes["ok"] != maxQueuedAdmin || codes["throttled"] != n-maxQueuedAdmin || len(codes) != 2 {
		t.Fatalf("outcomes %v; want %d created and %d throttled", codes, maxQueuedAdmin, n-maxQueuedAdmin)
	}
	if got := len(act.Image().Topics); got != maxQueuedAdmin {
		t.Fatalf("%d topics; want %d", got, maxQueuedAdmin)
	}
}
