package groups

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kip848Member is a franz-go consumer using the KIP-848 protocol
// (ServerSideBalancer), committing what it consumed after every poll,
// before it allows a rebalance.
type kip848Member struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startKIP848Member(t *testing.T, c *cluster, name, group, topic string, rec *recorder) *kip848Member {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(true)...), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var logged atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	// commit is bounded: franz-go keeps dialing a killed coordinator
	// until the request's context ends.
	commit := func(offs map[string]map[int32]kgo.EpochOffset) {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		cl.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				if ctx.Err() == nil && logged.Add(1) < 20 {
					t.Logf("%s: commit: %v", name, err)
				}
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 && logged.Add(1) < 20 {
						t.Logf("%s: commit %s/%d: %v", name, rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
					}
				}
			}
		})
	}
	m := &kip848Member{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				cl.AllowRebalance()
				return
			}
			fs.EachRecord(func(r *kgo.Record) { rec.add(name, string(r.Value)) })
			// Commit what was consumed before a rebalance may take the
			// partitions away.
			if offs := cl.UncommittedOffsets(); len(offs) > 0 {
				commit(offs)
			}
			cl.AllowRebalance()
		}
	}()
	return m
}

func (m *kip848Member) stop() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

// waitConsumerGroup waits until ConsumerGroupDescribe shows group Stable
// with n members.
func (c *cluster) waitConsumerGroup(group string, n int, d time.Duration) {
	c.t.Helper()
	cl := c.Client()
	deadline := time.Now().Add(d)
	for {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 &&
			resp.Groups[0].State == "Stable" && len(resp.Groups[0].Members) == n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("consumer group %s not Stable with %d members after %v: %+v %v", group, n, d, resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKIP848CoordinatorKilled: on three nodes, a KIP-848 group of franz-go
// consumers (ServerSideBalancer) consumes a 12-partition RF 3 topic while
// members join and leave; the node coordinating the group is SIGKILLed
// mid-stream. Every record is consumed, and the committed offsets reach
// the log end.
func TestKIP848CoordinatorKilled(t *testing.T) {
	c := startClusterWith(t, map[string]string{
		"group.consumer.heartbeat.interval.ms":     "500",
		"group.consumer.min.heartbeat.interval.ms": "500",
		"group.consumer.session.timeout.ms":        "10000",
		"group.consumer.min.session.timeout.ms":    "10000",
	})
	const topic, group, partitions = "kip848", "kip848-group", 12
	c.CreateTopic(topic, partitions, 3, nil, nil)
	rec := newRecorder()
	var mu sync.Mutex
	members := map[string]*kip848Member{}
	start := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		members[name] = startKIP848Member(t, c, name, group, topic, rec)
	}
	stop := func(name string) {
		mu.Lock()
		m := members[name]
		delete(members, name)
		mu.Unlock()
		m.stop()
	}
	defer func() {
		for name := range members {
			stop(name)
		}
	}()

	start("m1")
	start("m2")
	start("m3")
	c.waitConsumerGroup(group, 3, 60*time.Second)
	c.produce(topic, "k", 0, 3000)
	rec.waitDistinct(t, 3000, 60*time.Second)
	start("m4")
	c.waitConsumerGroup(group, 4, 60*time.Second)
	c.produce(topic, "k", 3000, 3000)
	stop("m2")
	c.waitConsumerGroup(group, 3, 60*time.Second)
	rec.waitDistinct(t, 6000, 60*time.Second)

	coord, err := c.coordinator(c.Client(), group)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL node %d, the coordinator of %s", coord, group)
	c.Node(coord).Kill()
	c.produce(topic, "k", 6000, 3000)
	rec.waitDistinct(t, 9000, 120*time.Second)
	c.waitConsumerGroup(group, 3, 120*time.Second)
	c.waitCommittedAtEnd(group, topic, 120*time.Second)
	dups := rec.check(t, "k", 9000)
	t.Logf("9000 records consumed, %d redelivered; per member %v", dups, fmt.Sprint(rec.byMember))
}
