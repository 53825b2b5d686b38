// Package groups runs consumer groups of real Kafka clients (franz-go,
// sarama, segmentio/kafka-go, kcat/librdkafka, KafkaJS) against a real
// three-broker sluice cluster (three `sluice serve` processes, every node a
// controller voter): membership changes mid-stream, a consume → transform
// → produce chain, the group coordinator SIGKILLed under load, and bad
// group requests. See README.md.
package groups

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// clusterProps are the broker settings of every test cluster: fast
// rebalances and failure detection, and everything replicated three ways.
var clusterProps = map[string]string{
	"group.initial.rebalance.delay.ms": "0",
	"group.min.session.timeout.ms":     "1000",
	"offsets.topic.replication.factor": "3",
	"offsets.topic.num.partitions":     "10",
	"default.replication.factor":       "3",
	"broker.session.timeout.ms":        "3000",
	"broker.heartbeat.interval.ms":     "500",
	"replica.lag.time.max.ms":          "5000",
}

// cluster is three sluice processes forming one cluster (every node a
// controller voter and a broker).
type cluster struct {
	*testcluster.Cluster
	t *testing.T
}

// startCluster starts three nodes (each a controller voter and a broker)
// and waits until every one serves Kafka requests and __consumer_offsets
// exists with a leader for every partition.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterWith(t, nil)
}

// startClusterWith is startCluster with extra broker settings.
func startClusterWith(t *testing.T, extra map[string]string) *cluster {
	t.Helper()
	const n = 3
	props := maps.Clone(clusterProps)
	maps.Copy(props, extra)
	start := time.Now()
	c := &cluster{t: t, Cluster: testcluster.Start(t, testcluster.Options{
		Nodes: n, Props: props, NoWait: true, StartTimeout: 30 * time.Second,
	})}
	// Create __consumer_offsets now (FindCoordinator does) so the tests do
	// not time its creation.
	cl := c.Client()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.coordinator(cl, "warmup")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no group coordinator 30s after start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.WaitTopicReady("__consumer_offsets", 0, 30*time.Second)
	t.Logf("cluster of %d up in %v: %s", n, time.Since(start).Round(time.Millisecond), c.bootstrap())
	return c
}

// bootstrap is the comma-separated Kafka listeners of the running nodes.
func (c *cluster) bootstrap() string { return strings.Join(c.Addrs(true), ",") }

func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// coordinator asks FindCoordinator (v3, one key) which node coordinates
// group.
func (c *cluster) coordinator(cl *kgo.Client, group string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.Version = 3
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	return resp.NodeID, nil
}

// value is record i's value in a test: prefix-0000042.
func value(prefix string, i int) string { return fmt.Sprintf("%s-%07d", prefix, i) }

// produce writes records from..from+count-1 (values value(prefix, i), keyed
// by i so they spread over the partitions) with an idempotent acks=all
// franz-go producer.
func (c *cluster) produce(topic, prefix string, from, count int) {
	c.t.Helper()
	c.produceChunked(topic, prefix, from, count, 2000)
}

// produceChunked is produce waiting for acknowledgements every chunk
// records.
func (c *cluster) produceChunked(topic, prefix string, from, count, chunk int) {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(true)...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	ctx := tctx(c.t, 120*time.Second)
	for lo := from; lo < from+count; lo += chunk {
		var rs []*kgo.Record
		for i := lo; i < min(lo+chunk, from+count); i++ {
			rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(value(prefix, i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			c.t.Fatalf("produce %s: %v", topic, err)
		}
	}
}

// endOffsets returns the end offset of every partition of topic.
func (c *cluster) endOffsets(topic string) map[int32]int64 {
	c.t.Helper()
	lo, err := c.Admin().ListEndOffsets(tctx(c.t, 15*time.Second), topic)
	if err != nil {
		c.t.Fatalf("ListEndOffsets: %v", err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			c.t.Fatalf("ListEndOffsets %s/%d: %v", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

// committed returns group's committed offsets of topic (kadm.FetchOffsets).
func (c *cluster) committed(adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	offs, err := adm.FetchOffsets(tctx(c.t, 10*time.Second), group)
	if err != nil {
		return nil, err
	}
	if err := offs.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// waitCommittedAtEnd waits (up to d) until group's committed offset of
// every partition of topic equals the partition's end offset.
func (c *cluster) waitCommittedAtEnd(group, topic string, d time.Duration) {
	c.t.Helper()
	ends := c.endOffsets(topic)
	adm := c.Admin()
	deadline := time.Now().Add(d)
	nextLog := time.Now().Add(2 * time.Second)
	for {
		got, err := c.committed(adm, group, topic)
		bad := ""
		if err != nil {
			bad = err.Error()
		} else {
			for p, end := range ends {
				if o, ok := got[p]; end > 0 && (!ok || o != end) {
					bad += fmt.Sprintf(" p%d: committed %d end %d;", p, o, end)
				}
			}
		}
		if bad == "" {
			c.t.Logf("group %s: committed offsets at the log end of %s (%d partitions)", group, topic, len(ends))
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("group %s: committed offsets not at the log end after %v:%s", group, d, bad)
		}
		if time.Now().After(nextLog) {
			c.t.Logf("group %s: waiting for commits:%s", group, bad)
			nextLog = time.Now().Add(2 * time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStable waits until group is Stable with n members that each have
// partitions of topic assigned.
func (c *cluster) waitStable(group string, n int, d time.Duration) {
	c.t.Helper()
	adm := c.Admin()
	deadline := time.Now().Add(d)
	var last string
	for {
		gs, err := adm.DescribeGroups(tctx(c.t, 5*time.Second), group)
		if err == nil {
			g := gs[group]
			ok := g.Err == nil && g.State == "Stable" && len(g.Members) == n
			assigned := 0
			for _, m := range g.Members {
				if ca, _ := m.Assigned.AsConsumer(); ca != nil {
					for _, t := range ca.Topics {
						assigned += len(t.Partitions)
					}
					if len(ca.Topics) == 0 {
						ok = false
					}
				} else {
					ok = false
				}
			}
			last = fmt.Sprintf("state %s, %d members, %d partitions assigned, err %v", g.State, len(g.Members), assigned, g.Err)
			if ok {
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("group %s not Stable with %d members after %v: %s", group, n, d, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// recorder counts the values consumers saw.
type recorder struct {
	mu       sync.Mutex
	seen     map[string]int
	byMember map[string]int
}

func newRecorder() *recorder {
	return &recorder{seen: map[string]int{}, byMember: map[string]int{}}
}

func (r *recorder) add(member, v string) {
	r.mu.Lock()
	r.seen[v]++
	r.byMember[member]++
	r.mu.Unlock()
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// waitDistinct waits until n distinct values were seen.
func (r *recorder) waitDistinct(t *testing.T, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for r.distinct() < n {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d distinct records after %v, want %d", r.distinct(), d, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDistinctOK is waitDistinct that reports instead of failing.
func (r *recorder) waitDistinctOK(n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for r.distinct() < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// check verifies every value(prefix, 0..total-1) was seen at least once
// and nothing else was; it returns the number of redeliveries.
func (r *recorder) check(t *testing.T, prefix string, total int) (dups int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	missing := 0
	for i := range total {
		k := r.seen[value(prefix, i)]
		if k == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("record %s never consumed", value(prefix, i))
			}
		}
		if k > 1 {
			dups += k - 1
		}
	}
	if len(r.seen) != total {
		t.Errorf("%d distinct values consumed, want %d", len(r.seen), total)
	}
	if missing > 0 {
		t.Fatalf("%d of %d records never consumed", missing, total)
	}
	return dups
}

// diagnoseMissing logs where the records no member consumed are (partition
// and offset) and the group's committed offsets, to tell a client's
// at-most-once window from a broker fault.
func (c *cluster) diagnoseMissing(t *testing.T, rec *recorder, topic, group, prefix string, total int) {
	t.Helper()
	rec.mu.Lock()
	missing := map[string]bool{}
	for i := range total {
		if rec.seen[value(prefix, i)] == 0 {
			missing[value(prefix, i)] = true
		}
	}
	rec.mu.Unlock()
	if len(missing) == 0 {
		return
	}
	ends := c.endOffsets(topic)
	cl := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	read := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if read[p] < e {
				return false
			}
		}
		return true
	}
	for !done() && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			read[r.Partition] = r.Offset + 1
			if missing[string(r.Value)] {
				t.Logf("missing %s is at partition %d offset %d", r.Value, r.Partition, r.Offset)
			}
		})
	}
	committed, err := c.committed(c.Admin(), group, topic)
	t.Logf("committed %v (err %v); log ends %v", committed, err, ends)
}
