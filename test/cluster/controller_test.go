package cluster

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
)

var activeLineRe = regexp.MustCompile(`^time=(\S+) .*msg="active controller"`)

// activeController returns the node whose log most recently says it became
// the active controller (sluice has no Kafka API that names it), and when.
func (c *cluster) activeController() (int32, time.Time) {
	var best int32 = -1
	var bestAt time.Time
	for _, p := range c.Nodes() {
		f, err := os.Open(p.LogPath())
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			m := activeLineRe.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, m[1])
			if err == nil && at.After(bestAt) {
				best, bestAt = int32(p.NodeID()), at
			}
		}
		f.Close()
	}
	return best, bestAt
}

// produceAcked produces n records with an idempotent acks=all producer
// (round-robin over the topic's partitions) and returns the
// acknowledged ones; every one of them must be acknowledged.
func (c *cluster) produceAcked(topic string, parts int32, prefix string, n int) map[string]testcluster.Ack {
	c.t.Helper()
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Value: fmt.Appendf(nil, "%s-%07d", prefix, i), Partition: int32(i) % parts}
	}
	res := cl.ProduceSync(ctx, rs...)
	out := map[string]testcluster.Ack{}
	for _, r := range res {
		if r.Err != nil {
			c.t.Fatalf("produce %s to %s: %v", r.Record.Value, topic, r.Err)
		}
		out[string(r.Record.Value)] = testcluster.Ack{Partition: r.Record.Partition, Offset: r.Record.Offset}
	}
	return out
}

// TestControllerFailoverAndFullRestart SIGKILLs the active controller:
// CreateTopics through a surviving node works again within seconds, another
// voter becomes active and the killed node's partition leaderships move
// away. Then all three nodes are SIGKILLed and restarted on their data: the
// cluster comes back with its brokers, its topics and every record
// acknowledged under acks=all.
func TestControllerFailoverAndFullRestart(t *testing.T) {
	c := startCluster(t, 3, nil)
	const topicA, topicB, parts = "ctl-a", "ctl-b", int32(3)
	c.CreateTopic(topicA, parts, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	ackedA := c.produceAcked(topicA, parts, "a0", 3000)

	x, since := c.activeController()
	if x < 0 {
		t.Fatal("no node logged \"active controller\"")
	}
	md, err := c.Meta(topicA)
	if err != nil {
		t.Fatal(err)
	}
	var led []int32
	for p, m := range md {
		if m.Leader == x {
			led = append(led, p)
		}
	}
	slices.Sort(led)
	t.Logf("active controller: node %d (since %s); it leads %s partitions %v", x, since.Format("15:04:05.000"), topicA, led)
	c.Node(x).Kill()
	killedAt := time.Now()

	moved := testcluster.WaitFor(t, 20*time.Second, fmt.Sprintf("no partition of %s led by the killed node %d", topicA, x), func() (bool, string) {
		m, err := c.Meta(topicA)
		if err != nil {
			return false, err.Error()
		}
		for p, pm := range m {
			if pm.Leader == x || pm.Leader < 0 {
				return false, fmt.Sprintf("partition %d: %v", p, pm)
			}
		}
		return true, ""
	})
	_ = moved
	t.Logf("partition leadership moved off node %d %v after the kill", x, time.Since(killedAt).Round(time.Millisecond))
	// CreateTopics through a survivor: it must work within seconds.
	var survivors []string
	for _, p := range c.Nodes() {
		if int32(p.NodeID()) != x {
			survivors = append(survivors, p.Addr())
		}
	}
	adminCl := c.Client(kgo.SeedBrokers(survivors...), kgo.RequestTimeoutOverhead(3*time.Second))
	var lastErr error
	attempts := 0
	testcluster.WaitFor(t, 20*time.Second, "CreateTopics through a surviving node", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 4000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topicB, parts, 2 // two brokers are active
		req.Topics = append(req.Topics, rt)
		attempts++
		resp, err := req.RequestWith(ctx, adminCl)
		if err != nil {
			lastErr = err
			return false, err.Error()
		}
		ec := resp.Topics[0].ErrorCode
		if ec == 0 || ec == kerr.TopicAlreadyExists.Code {
			return true, ""
		}
		lastErr = kerr.ErrorForCode(ec)
		return false, lastErr.Error()
	})
	t.Logf("CONTROLLER FAILOVER: CreateTopics through a survivor succeeded %v after SIGKILL of the active controller (attempt %d; last error before: %v)", time.Since(killedAt).Round(time.Millisecond), attempts, lastErr)
	newActive, newAt := c.activeController()
	if newActive == x || !newAt.After(since) {
		t.Errorf("no other node logged \"active controller\" after node %d was killed (latest: node %d at %v)", x, newActive, newAt)
	} else {
		t.Logf("node %d became the active controller %v after the kill", newActive, newAt.Sub(killedAt).Round(time.Millisecond))
	}
	testcluster.WaitFor(t, 20*time.Second, topicB+" has leaders", func() (bool, string) {
		m, err := c.Meta(topicB)
		if err != nil || len(m) != int(parts) {
			return false, fmt.Sprint(m, err)
		}
		for p, pm := range m {
			if pm.Leader < 0 || pm.Err != 0 {
				return false, fmt.Sprintf("partition %d: %v", p, pm)
			}
		}
		return true, ""
	})
	// acks=all keeps working on two of three replicas (min.insync.replicas=2).
	maps.Copy(ackedA, c.produceAcked(topicA, parts, "a1", 2000))
	ackedB := c.produceAcked(topicB, parts, "b1", 2000)

	c.Node(x).Restart()
	c.WaitBrokers(3, 60*time.Second)
	c.WaitTopicReady(topicA, int(parts), 60*time.Second)
	c.WaitTopicReady(topicB, int(parts), 60*time.Second)
	maps.Copy(ackedA, c.produceAcked(topicA, parts, "a2", 2000))
	maps.Copy(ackedB, c.produceAcked(topicB, parts, "b2", 2000))

	// SIGKILL everything, restart on the same data.
	for _, p := range c.Nodes() {
		p.Kill()
	}
	restartAt := time.Now()
	for _, p := range c.Nodes() {
		p.Restart()
	}
	c.WaitBrokers(3, 60*time.Second)
	c.WaitTopicReady(topicA, int(parts), 60*time.Second)
	c.WaitTopicReady(topicB, int(parts), 60*time.Second)
	t.Logf("full restart: 3 brokers and both topics back with full ISRs %v after the restart began", time.Since(restartAt).Round(time.Millisecond))
	adm := c.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has(topicA) || !topics.Has(topicB) {
		t.Fatalf("topics after the full restart: %v", strings.Join(topics.Names(), ","))
	}
	testcluster.CheckAcked(t, topicA+" after the full restart", ackedA, c.ConsumeAll(topicA, parts, 60*time.Second))
	testcluster.CheckAcked(t, topicB+" after the full restart", ackedB, c.ConsumeAll(topicB, parts, 60*time.Second))
	t.Logf("all %d + %d acknowledged records readable at their offsets after SIGKILL of all three nodes", len(ackedA), len(ackedB))
	// And the restarted cluster takes writes.
	c.produceAcked(topicA, parts, "a3", 300)
}
