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
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/testcluster"
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

// cluster is a testcluster.Cluster (node i+1 at Nodes()[i]; the first
// min(n,3) nodes are controller voters, the others broker-only) with this
// package's helpers.
type cluster struct {
	*testcluster.Cluster
	t *testing.T
}

// startCluster starts n nodes (3 voters, n-3 broker-only) with baseProps
// overridden by props, and waits until all n brokers are registered and
// visible in Metadata.
func startCluster(t *testing.T, n int, props map[string]string) *cluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("startCluster: need at least 3 nodes")
	}
	all := maps.Clone(baseProps)
	maps.Copy(all, props)
	return &cluster{Cluster: testcluster.Start(t, testcluster.Options{Nodes: n, Props: all}), t: t}
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
	testcluster.WaitFor(c.t, timeout, "every replica of "+topic+" at LEO == HW == leader LEO", func() (bool, string) {
		for part := int32(0); part < partitions; part++ {
			var want int64 = -1
			var states []string
			for _, p := range c.Nodes() {
				hp, err := httpPartitionOf(p, topic, part)
				if err != nil {
					return false, err.Error()
				}
				states = append(states, fmt.Sprintf("n%d(%s):leo=%d,hw=%d,isr=%v", p.NodeID(), hp.Role, hp.LogEndOffset, hp.HighWatermark, hp.ISR))
				if want == -1 {
					want = hp.LogEndOffset
				}
				if len(hp.ISR) != len(c.Nodes()) || hp.LogEndOffset != hp.HighWatermark || hp.LogEndOffset != want {
					return false, fmt.Sprintf("partition %d: %s", part, strings.Join(states, " "))
				}
			}
			leos[part] = want
		}
		return true, ""
	})
	return leos
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
	return maps.Clone(l.counts)
}

// loadGen is a testcluster.Load that also counts the producer's
// per-partition errors.
type loadGen struct {
	*testcluster.Load
	log *errLogger
}

// startLoad starts producing rate records/s (in ticks of 5 ms) with at
// most 2000 records in flight, round-robin over partitions 0..n-1, with an
// idempotent acks=all producer.
func (c *cluster) startLoad(topic string, n int32, rate int, extra ...kgo.Opt) *loadGen {
	var parts []int32
	for p := int32(0); p < n; p++ {
		parts = append(parts, p)
	}
	return c.startLoadOn(topic, parts, rate, extra...)
}

// startLoadOn is startLoad over the given partitions; extra options go
// after the defaults.
func (c *cluster) startLoadOn(topic string, partitions []int32, rate int, extra ...kgo.Opt) *loadGen {
	c.t.Helper()
	log := &errLogger{}
	l := c.StartLoad(topic, testcluster.LoadOptions{
		Partitions: partitions, Rate: rate,
		ClientOpts: append([]kgo.Opt{kgo.WithLogger(log)}, extra...),
	})
	return &loadGen{Load: l, log: log}
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
