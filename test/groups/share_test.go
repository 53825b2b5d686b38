package groups

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitShareGroup waits until share group group is described with n
// members, all at the assignment epoch, and every partition of its topic
// assigned; it returns the members' ids.
func (c *cluster) waitShareGroup(group string, n, partitions int, d time.Duration) (ids []string, epoch int32) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		// A new client each time: one keeps the coordinator it found,
		// which may be the node just killed.
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(true)...))
		if err != nil {
			c.t.Fatal(err)
		}
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		cl.Close()
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 && len(resp.Groups[0].Members) == n {
			g := resp.Groups[0]
			assigned := map[int32]bool{}
			ok := g.GroupState == "Stable"
			ids = ids[:0]
			for _, m := range g.Members {
				ok = ok && m.MemberEpoch == g.AssignmentEpoch && g.AssignmentEpoch == g.GroupEpoch
				ids = append(ids, m.MemberID)
				for _, tp := range m.Assignment.TopicPartitions {
					for _, p := range tp.Partitions {
						assigned[p] = true
					}
				}
			}
			if ok && len(assigned) == partitions {
				slices.Sort(ids)
				return ids, g.GroupEpoch
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("share group %s not formed with %d members after %v: %+v %v", group, n, d, resp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestShareGroupCoordinatorKilled: three franz-go share consumers
// (kgo.ShareGroup) form a share group on a 3-node cluster (RF 3), a fourth
// joins and leaves; the group's coordinator is SIGKILLed; the new coordinator loads the group
// from the replicated __consumer_offsets partition and the same members
// (same ids, not fenced and rejoined: the group epoch is the one before
// the kill) go on heartbeating with their assignments. Only the membership is tested (ShareFetch is another
// API).
func TestShareGroupCoordinatorKilled(t *testing.T) {
	c := startClusterWith(t, map[string]string{
		"group.share.heartbeat.interval.ms":     "1000",
		"group.share.min.heartbeat.interval.ms": "1000",
		"group.share.session.timeout.ms":        "20000",
		"group.share.min.session.timeout.ms":    "10000",
	})
	const topic, group, partitions = "queue", "share-workers", 3
	c.CreateTopic(topic, partitions, 3, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(name string) (stop func()) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(true)...), kgo.ClientID(name),
			kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.RetryTimeout(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		mctx, mcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for mctx.Err() == nil {
				cl.PollFetches(mctx)
			}
		}()
		return func() { mcancel(); <-done; cl.Close() }
	}
	for _, name := range []string{"w1", "w2", "w3"} {
		defer start(name)()
	}
	c.waitShareGroup(group, 3, partitions, 60*time.Second)
	// A fourth member joins and leaves: the group epoch is past what the
	// same three members joining a new group would reach, so a
	// coordinator that lost the group cannot pass for one that loaded it.
	stop4 := start("w4")
	c.waitShareGroup(group, 4, partitions, 60*time.Second)
	stop4()
	before, epoch := c.waitShareGroup(group, 3, partitions, 60*time.Second)
	coord, err := c.coordinator(c.Client(), group)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("share group at epoch %d; SIGKILL node %d, its coordinator", epoch, coord)
	c.Node(coord).Kill()
	after, epoch2 := c.waitShareGroup(group, 3, partitions, 90*time.Second)
	if !slices.Equal(before, after) || epoch2 != epoch {
		t.Fatalf("after the coordinator failover: members %v at epoch %d, were %v at %d", after, epoch2, before, epoch)
	}
	if now, err := c.coordinator(c.Client(), group); err != nil || now == coord {
		t.Fatalf("coordinator after the kill: %d %v", now, err)
	}
}
