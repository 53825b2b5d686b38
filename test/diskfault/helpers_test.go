// Package diskfault runs a real three-process sluice cluster with
// SLUICE_FAULT_INJECTION=1 and injects slow and failing disks through each
// node's POST /debug/disk while an idempotent acks=all franz-go producer
// runs: a slow leader disk only slows producing; a failing disk halts its
// broker (exit status 1, as Kafka halts when its last log dir fails), the
// ISR shrinks, a new leader takes over when it was the leader, and the
// restarted broker rejoins. Every acknowledged record is read back at its
// acknowledged offset, once.
//
// Run: go test ./test/diskfault -v -count=1
//
// The helpers follow test/cluster's (which cannot be imported: test files).
package diskfault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// props are the broker settings of the test cluster: short liveness
// timers so that a halted broker is fenced and replaced within seconds.
var props = map[string]string{
	"default.replication.factor":       "3",
	"offsets.topic.replication.factor": "3",
	"replica.lag.time.max.ms":          "2000",
	"broker.session.timeout.ms":        "3000",
	"broker.heartbeat.interval.ms":     "500",
	"auto.leader.rebalance.enable":     "false",
}

type cluster struct {
	t     *testing.T
	nodes []*testproc.Proc // nodes[i] has node id i+1; all three are voters
}

// startCluster starts three combined controller+broker nodes with fault
// injection enabled and waits until every node sees all three brokers.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	var sb strings.Builder
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%s\n", k, props[k])
	}
	cfgPath := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(cfgPath, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := testproc.FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var voters []string
	for i := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[3*i+1]))
	}
	c := &cluster{t: t}
	for i := range 3 {
		c.nodes = append(c.nodes, testproc.Start(t, testproc.Options{
			NodeID:         i + 1,
			ListenPort:     ports[3*i],
			ControllerPort: ports[3*i+1],
			HTTPPort:       ports[3*i+2],
			DataDir:        t.TempDir(),
			ExtraArgs:      []string{"--voters", strings.Join(voters, ","), "--config", cfgPath},
			Env:            []string{"SLUICE_FAULT_INJECTION=1"},
		}))
	}
	waitFor(t, 60*time.Second, "3 brokers registered", func() (bool, string) {
		for _, p := range c.nodes {
			ids, err := brokersFrom(p.Addr())
			if err != nil || len(ids) != 3 {
				return false, fmt.Sprintf("node %d: %v %v", p.NodeID(), ids, err)
			}
		}
		return true, ""
	})
	return c
}

func (c *cluster) node(id int32) *testproc.Proc { return c.nodes[id-1] }

func (c *cluster) addrs() []string {
	var out []string
	for _, p := range c.nodes {
		if p.Running() {
			out = append(out, p.Addr())
		}
	}
	return out
}

func (c *cluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// waitFor polls cond every 50 ms until it holds (returning how long that
// took) or fails the test after timeout with the last state cond reported.
func waitFor(t *testing.T, timeout time.Duration, desc string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for {
		ok, state := cond()
		if ok {
			return time.Since(start)
		}
		last = state
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, desc, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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

// partMeta is partition 0 of a topic as one node's Metadata reports it.
type partMeta struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

func (m partMeta) String() string {
	return fmt.Sprintf("leader=%d epoch=%d isr=%v", m.Leader, m.LeaderEpoch, m.ISR)
}

// meta asks every running node for partition 0 of topic; ok only if all
// answer the same.
func (c *cluster) meta(topic string) (partMeta, bool, string) {
	var first *partMeta
	var states []string
	for _, p := range c.nodes {
		if !p.Running() {
			continue
		}
		m, err := metadataFrom(p.Addr(), topic)
		if err != nil {
			return partMeta{}, false, fmt.Sprintf("node %d: %v", p.NodeID(), err)
		}
		states = append(states, fmt.Sprintf("node %d: %v", p.NodeID(), m))
		if first == nil {
			first = &m
		} else if m.String() != first.String() {
			return *first, false, strings.Join(states, "; ")
		}
	}
	if first == nil {
		return partMeta{}, false, "no node running"
	}
	return *first, true, strings.Join(states, "; ")
}

func metadataFrom(addr, topic string) (partMeta, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return partMeta{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return partMeta{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic || t.ErrorCode != 0 {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == 0 && p.ErrorCode == 0 {
				isr := slices.Clone(p.ISR)
				slices.Sort(isr)
				return partMeta{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: isr}, nil
			}
		}
	}
	return partMeta{}, fmt.Errorf("no partition 0 of %s", topic)
}

// createTopic creates a one-partition topic with RF 3 and waits until
// every node shows a leader and a full ISR.
func (c *cluster) createTopic(topic string, configs map[string]string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
	for k, v := range configs {
		cf := kmsg.NewCreateTopicsRequestTopicConfig()
		cf.Name, cf.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cf)
	}
	req.Topics = append(req.Topics, rt)
	cl := c.client()
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			c.t.Fatalf("CreateTopics: %v", err)
		}
		ec := resp.Topics[0].ErrorCode
		if ec == 0 {
			break
		}
		// Just after startup a broker may still be fenced.
		if ec == kerr.InvalidReplicationFactor.Code && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		c.t.Fatalf("CreateTopics: %v", kerr.ErrorForCode(ec))
	}
	waitFor(c.t, 30*time.Second, "topic ready", func() (bool, string) {
		m, ok, st := c.meta(topic)
		return ok && m.Leader > 0 && len(m.ISR) == 3, st
	})
}

// diskState is GET /debug/disk's JSON.
type diskState struct {
	Mode    string `json:"mode"`
	DelayMs int64  `json:"delayMs"`
	Fired   int64  `json:"fired"`
}

var httpClient = &http.Client{Timeout: 3 * time.Second}

// disk calls a node's fault-injection endpoint: POST with a query, or GET
// with an empty one.
func disk(t *testing.T, p *testproc.Proc, query string) diskState {
	t.Helper()
	url := "http://" + p.HTTPAddr() + "/debug/disk"
	var resp *http.Response
	var err error
	if query == "" {
		resp, err = httpClient.Get(url)
	} else {
		resp, err = httpClient.Post(url+"?"+query, "text/plain", nil)
	}
	if err != nil {
		t.Fatalf("node %d: /debug/disk?%s: %v", p.NodeID(), query, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("node %d: /debug/disk?%s: %s %s %v", p.NodeID(), query, resp.Status, body, err)
	}
	var st diskState
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("node %d: /debug/disk: %q: %v", p.NodeID(), body, err)
	}
	return st
}

// waitHalted waits until p exits and checks that it exited with status 1
// after logging Kafka's log-dir failure message; it returns how long that
// took.
func waitHalted(t *testing.T, p *testproc.Proc, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for p.Running() {
		if time.Since(start) > timeout {
			t.Fatalf("node %d still running %v after its disk failed", p.NodeID(), timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
	took := time.Since(start)
	var ee *exec.ExitError
	if err := p.ExitErr(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("node %d exited with %v, want exit status 1", p.NodeID(), err)
	}
	logData, _ := os.ReadFile(p.LogPath())
	if !strings.Contains(string(logData), "Shutdown broker because all log dirs in") {
		t.Errorf("node %d's log does not report the log dir failure", p.NodeID())
	}
	return took
}

type ack struct {
	partition int32
	offset    int64
}

// loadGen produces unique values to partition 0 at a steady rate with an
// idempotent acks=all franz-go producer (retrying without limit) and
// records every acknowledgement.
type loadGen struct {
	t      *testing.T
	cl     *kgo.Client
	topic  string
	mu     sync.Mutex
	acked  map[string]ack
	ackAt  []time.Time
	failed map[string]error
	sent   int
	stopc  chan struct{}
	done   chan struct{}
	recWG  sync.WaitGroup
}

func (c *cluster) startLoad(topic string, rate int) *loadGen {
	lg := &loadGen{t: c.t, topic: topic, acked: map[string]ack{}, failed: map[string]error{},
		stopc: make(chan struct{}), done: make(chan struct{})}
	lg.cl = c.client(
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
	go lg.run(rate)
	return lg
}

func (lg *loadGen) run(rate int) {
	defer close(lg.done)
	sem := make(chan struct{}, 1000)
	perTick := max(1, rate/100)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for seq := 0; ; {
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
			seq++
			lg.recWG.Add(1)
			lg.mu.Lock()
			lg.sent++
			lg.mu.Unlock()
			lg.cl.Produce(context.Background(), &kgo.Record{Value: []byte(v), Partition: 0}, func(r *kgo.Record, err error) {
				defer lg.recWG.Done()
				defer func() { <-sem }()
				lg.mu.Lock()
				defer lg.mu.Unlock()
				if err != nil {
					lg.failed[v] = err
					return
				}
				if prev, dup := lg.acked[v]; dup {
					lg.t.Errorf("value %s acknowledged twice (%v and %d)", v, prev, r.Offset)
				}
				lg.acked[v] = ack{r.Partition, r.Offset}
				lg.ackAt = append(lg.ackAt, time.Now())
			})
		}
	}
}

// acksSince counts acknowledgements after t and returns the first one's
// time.
func (lg *loadGen) acksSince(t time.Time) (n int, first time.Time) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for i := len(lg.ackAt) - 1; i >= 0 && lg.ackAt[i].After(t); i-- {
		n++
		first = lg.ackAt[i]
	}
	return n, first
}

// failures returns how many records failed and one of the errors.
func (lg *loadGen) failures() (int, error) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for _, err := range lg.failed {
		return len(lg.failed), err
	}
	return 0, nil
}

func (lg *loadGen) summary() string {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return fmt.Sprintf("sent=%d acked=%d failed=%d", lg.sent, len(lg.acked), len(lg.failed))
}

// stop stops producing and waits until every record is acknowledged or
// failed.
func (lg *loadGen) stop(timeout time.Duration) {
	lg.t.Helper()
	close(lg.stopc)
	<-lg.done
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := lg.cl.Flush(ctx); err != nil {
		lg.t.Fatalf("producer flush: %v (%s)", err, lg.summary())
	}
	lg.recWG.Wait()
}

func (lg *loadGen) abort() {
	select {
	case <-lg.stopc:
	default:
		close(lg.stopc)
	}
}

// consumeAll reads partition 0 from offset 0 up to its high watermark and
// returns value -> offset, failing on a value read twice.
func (c *cluster) consumeAll(topic string, timeout time.Duration) map[string]ack {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	adm := kadm.NewClient(c.client())
	var hw int64
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil && ends.Error() == nil {
			lo, _ := ends.Lookup(topic, 0)
			hw = lo.Offset
			break
		}
		if ctx.Err() != nil {
			c.t.Fatalf("ListEndOffsets: %v %v", err, ends.Error())
		}
		time.Sleep(200 * time.Millisecond)
	}
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	out := map[string]ack{}
	var next int64
	for next < hw {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("consuming: %v at %d of HW %d", ctx.Err(), next, hw)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if prev, dup := out[v]; dup {
				c.t.Errorf("value %q read twice: at %d and %d", v, prev.offset, r.Offset)
			}
			out[v] = ack{r.Partition, r.Offset}
			next = r.Offset + 1
		})
	}
	return out
}
