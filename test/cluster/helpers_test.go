// Package cluster runs real multi-process sluice clusters on loopback (three
// combined controller+broker nodes, sometimes an extra broker-only node) and
// checks the multi-broker guarantees with real franz-go clients: leader
// failover under acks=all, ISR shrink/expand with strict min.insync.replicas,
// controller failover and full-cluster restart, controlled shutdown under
// load, and the cost of replication.
//
// Run: go test ./test/cluster/ -v -count=1
package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// baseProps are broker settings every test cluster starts with: short
// liveness timers so failovers happen within seconds.
var baseProps = map[string]string{
	"default.replication.factor":       "3",
	"offsets.topic.replication.factor": "3",
	"offsets.topic.num.partitions":     "3",
	"group.initial.rebalance.delay.ms": "0",
	"replica.lag.time.max.ms":          "2000",
	"broker.session.timeout.ms":        "3000",
	"broker.heartbeat.interval.ms":     "500",
	"auto.leader.rebalance.enable":     "false",
}

// cluster is a set of `sluice serve` processes: nodes[i] has node id i+1.
// The first min(n,3) nodes are controller voters; the others are
// broker-only.
type cluster struct {
	t      *testing.T
	nodes  []*testproc.Proc
	mu     sync.Mutex
	paused map[int]bool
}

// pause SIGSTOPs a node; meta, metaAll and new clients skip it until resume.
func (c *cluster) pause(id int32) {
	c.t.Helper()
	c.node(id).Pause()
	c.mu.Lock()
	c.paused[int(id)] = true
	c.mu.Unlock()
}

func (c *cluster) resume(id int32) {
	c.t.Helper()
	c.node(id).Resume()
	c.mu.Lock()
	delete(c.paused, int(id))
	c.mu.Unlock()
}

// up reports whether a node is running and not paused.
func (c *cluster) up(p *testproc.Proc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return p.Running() && !c.paused[p.NodeID()]
}

// startCluster starts n nodes (3 voters, n-3 broker-only) with baseProps
// overridden by props, and waits until all n brokers are registered and
// visible in Metadata.
func startCluster(t *testing.T, n int, props map[string]string) *cluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("startCluster: need at least 3 nodes")
	}
	all := map[string]string{}
	for k, v := range baseProps {
		all[k] = v
	}
	for k, v := range props {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%s\n", k, all[k])
	}
	cfgPath := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(cfgPath, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := testproc.FreePorts(3 * n)
	if err != nil {
		t.Fatal(err)
	}
	kafka := func(i int) int { return ports[3*i] }
	ctrl := func(i int) int { return ports[3*i+1] }
	httpP := func(i int) int { return ports[3*i+2] }
	var voters []string
	for i := 0; i < 3; i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl(i)))
	}
	c := &cluster{t: t, paused: map[int]bool{}}
	for i := 0; i < n; i++ {
		o := testproc.Options{
			NodeID:     i + 1,
			ListenPort: kafka(i),
			HTTPPort:   httpP(i),
			DataDir:    t.TempDir(),
			ExtraArgs:  []string{"--voters", strings.Join(voters, ","), "--config", cfgPath},
		}
		if i < 3 {
			o.ControllerPort = ctrl(i)
		}
		c.nodes = append(c.nodes, testproc.Start(t, o))
	}
	c.waitBrokers(n, 60*time.Second)
	return c
}

// node returns the process with the given node id.
func (c *cluster) node(id int32) *testproc.Proc { return c.nodes[id-1] }

// addrs are the Kafka addresses of the nodes (all of them, or only the
// running ones).
func (c *cluster) addrs(runningOnly bool) []string {
	var out []string
	for _, p := range c.nodes {
		if runningOnly && !c.up(p) {
			continue
		}
		out = append(out, p.Addr())
	}
	return out
}

// client returns a franz-go client seeded with every running node.
func (c *cluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs(true)...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *cluster) admin() *kadm.Client { return kadm.NewClient(c.client()) }

// waitBrokers waits until Metadata from some node lists n brokers.
func (c *cluster) waitBrokers(n int, timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, fmt.Sprintf("%d brokers registered (in every node's Metadata)", n), func() (bool, string) {
		var states []string
		ok := true
		for _, p := range c.nodes {
			if !c.up(p) {
				continue
			}
			ids, err := brokersFrom(p.Addr())
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", p.NodeID(), err)
			}
			states = append(states, fmt.Sprintf("node %d sees %v", p.NodeID(), ids))
			ok = ok && len(ids) == n
		}
		return ok, strings.Join(states, "; ")
	})
}

// brokersFrom returns the broker ids in one node's Metadata response.
func brokersFrom(addr string) ([]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// waitFor polls cond every 100 ms until it holds or timeout passes, then
// fails the test with desc and the last state cond reported.
func waitFor(t *testing.T, timeout time.Duration, desc string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var last string
	for {
		ok, state := cond()
		if ok {
			return time.Since(start)
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, desc, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// partMeta is one partition as Metadata reports it.
type partMeta struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Err         int16
}

func (m partMeta) String() string {
	return fmt.Sprintf("leader=%d epoch=%d replicas=%v isr=%v err=%d", m.Leader, m.LeaderEpoch, m.Replicas, m.ISR, m.Err)
}

// metadataFrom asks one specific node (by address) for the topic's
// partitions.
func metadataFrom(ctx context.Context, addr, topic string) (map[int32]partMeta, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]partMeta{}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("topic %s: error code %d", topic, t.ErrorCode)
		}
		for _, p := range t.Partitions {
			isr := slices.Clone(p.ISR)
			slices.Sort(isr)
			out[p.Partition] = partMeta{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: isr, Err: p.ErrorCode}
		}
	}
	return out, nil
}

// meta asks the running nodes, in order, for the topic's partitions and
// returns the first answer.
func (c *cluster) meta(topic string) (map[int32]partMeta, error) {
	var lastErr error
	for _, p := range c.nodes {
		if !c.up(p) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m, err := metadataFrom(ctx, p.Addr(), topic)
		cancel()
		if err == nil {
			return m, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no node answered Metadata: %v", lastErr)
}

// metaAll asks every running node; a state holds only if all agree.
func (c *cluster) metaAll(topic string) (map[int32]map[int32]partMeta, error) {
	out := map[int32]map[int32]partMeta{}
	for _, p := range c.nodes {
		if !c.up(p) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m, err := metadataFrom(ctx, p.Addr(), topic)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("node %d: %v", p.NodeID(), err)
		}
		out[int32(p.NodeID())] = m
	}
	return out, nil
}

// createTopic creates a topic (replicas RF, or a manual assignment if
// assign is non-nil) with the given configs and waits until every running
// node's Metadata shows every partition with a leader and a full ISR.
func (c *cluster) createTopic(topic string, partitions int32, rf int16, configs map[string]string, assign [][]int32) {
	c.t.Helper()
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = partitions
	rt.ReplicationFactor = rf
	if assign != nil {
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		for i, a := range assign {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition = int32(i)
			ra.Replicas = a
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
	}
	for k, v := range configs {
		cf := kmsg.NewCreateTopicsRequestTopicConfig()
		cf.Name = k
		cf.Value = kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cf)
	}
	req.Topics = append(req.Topics, rt)
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			c.t.Fatalf("CreateTopics %s: %v", topic, err)
		}
		ec := resp.Topics[0].ErrorCode
		if ec == 0 {
			break
		}
		// Metadata lists registered brokers even while they are still
		// fenced, so placement can briefly see fewer active brokers than
		// the replication factor (INVALID_REPLICATION_FACTOR) right after
		// startup.
		if ec == kerr.InvalidReplicationFactor.Code && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		msg := ""
		if m := resp.Topics[0].ErrorMessage; m != nil {
			msg = *m
		}
		c.t.Fatalf("CreateTopics %s: %v (%s)", topic, kerr.ErrorForCode(ec), msg)
	}
	n := int(partitions)
	if assign != nil {
		n = len(assign)
	}
	c.waitTopicReady(topic, n, 30*time.Second)
}

// waitTopicReady waits until every running node reports n partitions,
// each with a live leader and every replica in the ISR.
func (c *cluster) waitTopicReady(topic string, n int, timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, "topic "+topic+" ready on every node", func() (bool, string) {
		all, err := c.metaAll(topic)
		if err != nil {
			return false, err.Error()
		}
		for id, m := range all {
			if len(m) != n {
				return false, fmt.Sprintf("node %d: %d partitions", id, len(m))
			}
			for p, pm := range m {
				if pm.Err != 0 || pm.Leader < 0 || len(pm.ISR) != len(pm.Replicas) {
					return false, fmt.Sprintf("node %d: partition %d: %v", id, p, pm)
				}
			}
		}
		return true, ""
	})
}

// httpPartition is /api/v1/partitions' JSON shape.
type httpPartition struct {
	Topic          string    `json:"topic"`
	Partition      int32     `json:"partition"`
	Leader         int32     `json:"leader"`
	LeaderEpoch    int32     `json:"leaderEpoch"`
	Replicas       []int32   `json:"replicas"`
	ISR            []int32   `json:"isr"`
	Role           string    `json:"role"`
	LogEndOffset   int64     `json:"logEndOffset"`
	HighWatermark  int64     `json:"highWatermark"`
	ReplicaStates  []httpRep `json:"replicaStates"`
	LogStartOffset int64     `json:"logStartOffset"`
}

type httpRep struct {
	ID             int32 `json:"id"`
	LogEndOffset   int64 `json:"logEndOffset"`
	HighWatermark  int64 `json:"highWatermark"`
	InSync         bool  `json:"inSync"`
	LastCaughtUpMs int64 `json:"lastCaughtUpMs"`
}

var httpClient = &http.Client{Timeout: 3 * time.Second}

// httpPartitions reads a node's /api/v1/partitions.
func httpPartitions(p *testproc.Proc) ([]httpPartition, error) {
	resp, err := httpClient.Get("http://" + p.HTTPAddr() + "/api/v1/partitions")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	var out []httpPartition
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// httpPartitionOf returns one partition from a node's /api/v1/partitions.
func httpPartitionOf(p *testproc.Proc, topic string, part int32) (httpPartition, error) {
	ps, err := httpPartitions(p)
	if err != nil {
		return httpPartition{}, err
	}
	for _, hp := range ps {
		if hp.Topic == topic && hp.Partition == part {
			return hp, nil
		}
	}
	return httpPartition{}, fmt.Errorf("node %d: %s/%d not in /api/v1/partitions", p.NodeID(), topic, part)
}

// waitReplicasConverged waits until, for every partition of the topic,
// every node hosting a replica reports LEO == HW == the leader's LEO, and
// returns each partition's final LEO.
func (c *cluster) waitReplicasConverged(topic string, partitions int32, timeout time.Duration) map[int32]int64 {
	c.t.Helper()
	leos := map[int32]int64{}
	waitFor(c.t, timeout, "every replica of "+topic+" at LEO == HW == leader LEO", func() (bool, string) {
		for part := int32(0); part < partitions; part++ {
			var want int64 = -1
			var states []string
			for _, p := range c.nodes {
				hp, err := httpPartitionOf(p, topic, part)
				if err != nil {
					return false, err.Error()
				}
				states = append(states, fmt.Sprintf("n%d(%s):leo=%d,hw=%d,isr=%v", p.NodeID(), hp.Role, hp.LogEndOffset, hp.HighWatermark, hp.ISR))
				if want == -1 {
					want = hp.LogEndOffset
				}
				if len(hp.ISR) != len(c.nodes) || hp.LogEndOffset != hp.HighWatermark || hp.LogEndOffset != want {
					return false, fmt.Sprintf("partition %d: %s", part, strings.Join(states, " "))
				}
			}
			leos[part] = want
		}
		return true, ""
	})
	return leos
}

// ack is where an acknowledged record was written.
type ack struct {
	partition int32
	offset    int64
}

type ackEvent struct {
	at        time.Time
	partition int32
}

// errLogger is a franz-go logger that counts the per-partition errors the
// producer saw in produce responses (retried or not) and the request-level
// failures, which franz-go otherwise hides behind its retries.
type errLogger struct {
	mu       sync.Mutex
	counts   map[string]int
	examples []string
}

var producedErrRe = regexp.MustCompile(`(retrying|err|fatal|resetting|skipped)@-?\d+(?:,\d+)?\(([A-Z_]+)`)

func (l *errLogger) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *errLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch {
	case msg == "produced":
		s := fmt.Sprint(keyvals...)
		if !strings.Contains(s, "(") {
			return
		}
		ms := producedErrRe.FindAllStringSubmatch(s, -1)
		if len(ms) == 0 {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.counts == nil {
			l.counts = map[string]int{}
		}
		for _, m := range ms {
			l.counts[m[2]]++
		}
		if len(l.examples) < 5 {
			l.examples = append(l.examples, s)
		}
	case strings.HasPrefix(msg, "produce request failed") || strings.HasPrefix(msg, "random error while producing"):
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.counts == nil {
			l.counts = map[string]int{}
		}
		l.counts["request: "+msg]++
	}
}

func (l *errLogger) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.counts {
		out[k] = v
	}
	return out
}

// loadGen produces unique values round-robin over a topic's partitions at
// a steady rate with an idempotent acks=all franz-go producer, and records
// each acknowledgement.
type loadGen struct {
	t          *testing.T
	cl         *kgo.Client
	log        *errLogger
	topic      string
	partitions []int32

	mu       sync.Mutex
	acked    map[string]ack
	ackLog   []ackEvent
	failed   map[string]error
	lastAck  time.Time
	maxGap   time.Duration
	maxGapAt time.Time
	sent     int

	stopc chan struct{}
	done  chan struct{}
	recWG sync.WaitGroup
}

// startLoad starts producing rate records/s (in ticks of 5 ms) with at
// most 2000 records in flight, round-robin over partitions 0..n-1.
func (c *cluster) startLoad(topic string, n int32, rate int, extra ...kgo.Opt) *loadGen {
	var parts []int32
	for p := int32(0); p < n; p++ {
		parts = append(parts, p)
	}
	return c.startLoadOn(topic, parts, rate, extra...)
}

// startLoadOn is startLoad over the given partitions.
func (c *cluster) startLoadOn(topic string, partitions []int32, rate int, extra ...kgo.Opt) *loadGen {
	c.t.Helper()
	lg := &loadGen{
		t: c.t, topic: topic, partitions: partitions, log: &errLogger{},
		acked: map[string]ack{}, failed: map[string]error{},
		stopc: make(chan struct{}), done: make(chan struct{}),
	}
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.WithLogger(lg.log),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
	lg.cl = c.client(append(opts, extra...)...)
	go lg.run(rate)
	return lg
}

func (lg *loadGen) run(rate int) {
	defer close(lg.done)
	sem := make(chan struct{}, 2000)
	perTick := max(1, rate/200)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	seq := 0
	for {
		select {
		case <-lg.stopc:
			return
		case <-tick.C:
		}
		for range perTick {
			select {
			case sem <- struct{}{}:
			case <-lg.stopc:
				return
			}
			v := fmt.Sprintf("%s-%09d", lg.topic, seq)
			part := lg.partitions[seq%len(lg.partitions)]
			seq++
			lg.recWG.Add(1)
			lg.mu.Lock()
			lg.sent++
			lg.mu.Unlock()
			lg.cl.Produce(context.Background(), &kgo.Record{Value: []byte(v), Partition: part}, func(r *kgo.Record, err error) {
				defer lg.recWG.Done()
				defer func() { <-sem }()
				now := time.Now()
				lg.mu.Lock()
				defer lg.mu.Unlock()
				if err != nil {
					lg.failed[v] = err
					return
				}
				if prev, dup := lg.acked[v]; dup {
					lg.t.Errorf("value %s acknowledged twice (%v and %d/%d)", v, prev, r.Partition, r.Offset)
				}
				lg.acked[v] = ack{r.Partition, r.Offset}
				lg.ackLog = append(lg.ackLog, ackEvent{now, r.Partition})
				if !lg.lastAck.IsZero() && now.Sub(lg.lastAck) > lg.maxGap {
					lg.maxGap, lg.maxGapAt = now.Sub(lg.lastAck), now
				}
				lg.lastAck = now
			})
		}
	}
}

// acksSince counts acknowledgements after t (for one partition, or all if
// part < 0).
func (lg *loadGen) acksSince(t time.Time, part int32) (n int, first time.Time) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for i := len(lg.ackLog) - 1; i >= 0 && lg.ackLog[i].at.After(t); i-- {
		if part < 0 || lg.ackLog[i].partition == part {
			n++
			first = lg.ackLog[i].at
		}
	}
	return n, first
}

// maxGapPart is the longest time between consecutive acknowledgements of
// one partition (part < 0: any partition) among those acknowledged in
// [from, to] (zero times: unbounded).
func (lg *loadGen) maxGapPart(part int32, from, to time.Time) (gap time.Duration, at time.Time) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	var last time.Time
	for _, e := range lg.ackLog {
		if part >= 0 && e.partition != part {
			continue
		}
		if (from.IsZero() || !e.at.Before(from)) && (to.IsZero() || !e.at.After(to)) {
			if !last.IsZero() && e.at.Sub(last) > gap {
				gap, at = e.at.Sub(last), e.at
			}
		}
		last = e.at
	}
	return gap, at
}

// stop stops producing new records and waits (bounded) until every
// record produced so far is acknowledged or failed.
func (lg *loadGen) stop(timeout time.Duration) {
	lg.t.Helper()
	select {
	case <-lg.stopc:
		return
	default:
	}
	close(lg.stopc)
	<-lg.done
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := lg.cl.Flush(ctx); err != nil {
		lg.t.Fatalf("producer flush: %v (records still unacknowledged %v after stop)", err, timeout)
	}
	lg.recWG.Wait()
}

// abort stops producing without waiting (for defer on failure paths).
func (lg *loadGen) abort() {
	select {
	case <-lg.stopc:
	default:
		close(lg.stopc)
	}
}

func (lg *loadGen) ackedCopy() map[string]ack {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	out := make(map[string]ack, len(lg.acked))
	for k, v := range lg.acked {
		out[k] = v
	}
	return out
}

func (lg *loadGen) summary() string {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return fmt.Sprintf("sent=%d acked=%d failed=%d maxAckGap=%v", lg.sent, len(lg.acked), len(lg.failed), lg.maxGap.Round(time.Millisecond))
}

// consumeAll reads every partition of the topic from offset 0 up to its
// high watermark (as ListOffsets reports it) with a franz-go consumer and
// returns value -> where it was read. It fails on a value read twice.
func (c *cluster) consumeAll(topic string, partitions int32, timeout time.Duration) map[string]ack {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	adm := c.admin()
	var ends kadm.ListedOffsets
	var err error
	for {
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil && ends.Error() == nil {
			break
		}
		if ctx.Err() != nil {
			c.t.Fatalf("ListEndOffsets %s: %v %v", topic, err, ends.Error())
		}
		time.Sleep(200 * time.Millisecond)
	}
	hw := map[int32]int64{}
	offs := map[int32]kgo.Offset{}
	for part := int32(0); part < partitions; part++ {
		lo, ok := ends.Lookup(topic, part)
		if !ok {
			c.t.Fatalf("ListEndOffsets: no %s/%d", topic, part)
		}
		hw[part] = lo.Offset
		offs[part] = kgo.NewOffset().At(0)
	}
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	out := map[string]ack{}
	next := map[int32]int64{}
	remaining := func() int {
		n := 0
		for part, h := range hw {
			if next[part] < h {
				n++
			}
		}
		return n
	}
	for remaining() > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("consuming %s: %v; next %v, HW %v", topic, ctx.Err(), next, hw)
		}
		fs.EachError(func(t string, p int32, err error) {
			c.t.Logf("consume %s/%d: %v (retrying)", t, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if prev, dup := out[v]; dup {
				c.t.Errorf("value %q read twice: at %d/%d and %d/%d", v, prev.partition, prev.offset, r.Partition, r.Offset)
			}
			out[v] = ack{r.Partition, r.Offset}
			next[r.Partition] = r.Offset + 1
		})
	}
	return out
}

// checkAcked fails unless every acknowledged value was read at its
// acknowledged partition and offset.
func checkAcked(t *testing.T, what string, acked, read map[string]ack) {
	t.Helper()
	missing := 0
	for v, a := range acked {
		if got, ok := read[v]; !ok || got != a {
			if missing < 10 {
				t.Errorf("%s: acknowledged %s at %d/%d, found at %v (present=%v)", what, v, a.partition, a.offset, got, ok)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%s: %d of %d acknowledged records missing or moved", what, missing, len(acked))
	}
}

// diskRecords reads a partition's segment files from a stopped (or
// killed) node's data directory: every whole, CRC-valid batch up to the
// first torn one, as offset -> value.
func diskRecords(t *testing.T, dataDir, topic string, part int32) (map[int64]string, int64) {
	t.Helper()
	dir := filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, part))
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	var segs []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") && len(e.Name()) == 24 {
			segs = append(segs, e.Name())
		}
	}
	sort.Strings(segs)
	out := map[int64]string{}
	var end int64
	for _, s := range segs {
		f, err := os.Open(filepath.Join(dir, s))
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for len(data) > 0 {
			h, b, rest, err := batch.Next(data)
			if err != nil {
				break // torn tail or preallocated space
			}
			if err := batch.CheckCRC(b); err != nil {
				break
			}
			batch.Records(b, func(r batch.Record) bool {
				out[h.BaseOffset+int64(r.OffsetDelta)] = string(r.Value)
				return true
			})
			end = h.NextOffset()
			data = rest
		}
	}
	return out, end
}

func itoa(i int) string { return strconv.Itoa(i) }
