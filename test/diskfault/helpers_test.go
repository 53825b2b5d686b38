// Package diskfault runs a real three-process sluice cluster with
// SLUICE_FAULT_INJECTION=1 and injects slow and failing disks through each
// node's POST /debug/disk while an idempotent acks=all franz-go producer
// runs: a slow leader disk only slows producing; a failing disk halts its
// broker (exit status 1, as Kafka halts when its last log dir fails), the
// ISR shrinks, a new leader takes over when it was the leader, and the
// restarted broker rejoins. Every acknowledged record is read back at its
// acknowledged offset, once.
//
// Run: go test ./test/diskfault -v -count=1 (add -diskfault.syncfs to make
// every flush round one syncfs, sluice.log.flush.syncfs.min.partitions=1,
// so that the faults hit syncfs instead of per-partition fsyncs).
package diskfault

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
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

// cluster is three combined controller+broker nodes (node i+1 at
// Nodes()[i]) with fault injection enabled.
type cluster struct {
	*testcluster.Cluster
}

// startCluster starts the three nodes and waits until every node sees all
// three brokers.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	p := map[string]string{}
	for k, v := range props {
		p[k] = v
	}
	if *syncfs {
		p["sluice.log.flush.syncfs.min.partitions"] = "1"
	}
	return &cluster{testcluster.Start(t, testcluster.Options{
		Nodes: 3, Props: p, Env: []string{"SLUICE_FAULT_INJECTION=1"},
	})}
}

var syncfs = flag.Bool("diskfault.syncfs", false, "flush every round with one syncfs (sluice.log.flush.syncfs.min.partitions=1)")

// waitFor is testcluster.WaitFor polling every 50 ms: the durations it
// returns are the measurements this test logs.
func waitFor(t *testing.T, timeout time.Duration, desc string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return testcluster.WaitForEvery(t, 50*time.Millisecond, timeout, desc, cond)
}

// meta asks every running node for partition 0 of topic; ok only if all
// answer the same.
func (c *cluster) meta(topic string) (testcluster.PartitionMeta, bool, string) {
	var first *testcluster.PartitionMeta
	var states []string
	for _, p := range c.Nodes() {
		if !p.Running() {
			continue
		}
		m, err := partition0From(p.Addr(), topic)
		if err != nil {
			return testcluster.PartitionMeta{}, false, fmt.Sprintf("node %d: %v", p.NodeID(), err)
		}
		states = append(states, fmt.Sprintf("node %d: %v", p.NodeID(), m))
		if first == nil {
			first = &m
		} else if m.String() != first.String() {
			return *first, false, strings.Join(states, "; ")
		}
	}
	if first == nil {
		return testcluster.PartitionMeta{}, false, "no node running"
	}
	return *first, true, strings.Join(states, "; ")
}

// partition0From is partition 0 of topic as the node at addr reports it.
func partition0From(addr, topic string) (testcluster.PartitionMeta, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ps, err := testcluster.PartitionsFrom(ctx, addr, topic)
	if err != nil {
		return testcluster.PartitionMeta{}, err
	}
	if m, ok := ps[0]; ok && m.Err == 0 {
		return m, nil
	}
	return testcluster.PartitionMeta{}, fmt.Errorf("no partition 0 of %s", topic)
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
