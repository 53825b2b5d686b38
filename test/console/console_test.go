// Package console runs the cluster console (/status and /api/v1/cluster,
// internal/status) on a real three-process sluice cluster: every node must
// show the same cluster, and after a SIGKILL the others must show the dead
// broker and the under-replicated partitions — in the JSON and in the page
// as headless Chromium renders it (screenshot.go).
package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/status"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// props: fast failure detection, a small __consumer_offsets, everything
// replicated three ways.
var props = map[string]string{
	"group.initial.rebalance.delay.ms": "0",
	"group.min.session.timeout.ms":     "1000",
	"offsets.topic.replication.factor": "3",
	"offsets.topic.num.partitions":     "3",
	"default.replication.factor":       "3",
	"broker.session.timeout.ms":        "3000",
	"broker.heartbeat.interval.ms":     "500",
	"replica.lag.time.max.ms":          "5000",
}

const (
	topic      = "orders"
	partitions = 3
	groupID    = "billing"
)

var httpClient = &http.Client{Timeout: 5 * time.Second}

// clusterView reads a node's /api/v1/cluster.
func clusterView(p *testproc.Proc) (*status.ClusterView, error) {
	resp, err := httpClient.Get("http://" + p.HTTPAddr() + "/api/v1/cluster")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node %d: %s", p.NodeID(), resp.Status)
	}
	var v status.ClusterView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, fmt.Errorf("node %d: %v", p.NodeID(), err)
	}
	return &v, nil
}

// fingerprint is what every node's view must agree on: brokers with their
// status and controller flag, and each partition's leader, epoch and ISR.
func fingerprint(v *status.ClusterView) string {
	var sb strings.Builder
	for _, b := range v.Brokers {
		fmt.Fprintf(&sb, "b%d:%s:%v ", b.ID, b.Status, b.Controller)
	}
	for _, p := range v.Partitions {
		fmt.Fprintf(&sb, "%s/%d:%d@%d%v ", p.Topic, p.Partition, p.Leader, p.LeaderEpoch, p.ISR)
	}
	return sb.String()
}

// partitionsOf returns the view's partitions of topic.
func partitionsOf(v *status.ClusterView, topic string) []status.Partition {
	var out []status.Partition
	for _, p := range v.Partitions {
		if p.Topic == topic {
			out = append(out, p)
		}
	}
	return out
}

// healthy checks one view of the whole cluster: three alive brokers, a
// controller, every replica of the topic with a known LEO and HW, the
// group with its lag, and produce rates.
func healthy(v *status.ClusterView) string {
	if len(v.Brokers) != 3 || v.Summary.AliveBrokers != 3 || v.Controller < 0 {
		return fmt.Sprintf("brokers %+v controller %d", v.Brokers, v.Controller)
	}
	for _, b := range v.Brokers {
		if !b.Reachable || b.Version == "" || b.HTTP == "" {
			return fmt.Sprintf("broker %+v", b)
		}
	}
	ps := partitionsOf(v, topic)
	if len(ps) != partitions {
		return fmt.Sprintf("%d partitions of %s", len(ps), topic)
	}
	for _, p := range ps {
		if p.UnderReplicated || p.Offline || p.LeaderHighWatermark <= 0 || len(p.ReplicaStates) != 3 {
			return fmt.Sprintf("partition %+v", p)
		}
		for _, r := range p.ReplicaStates {
			if r.LogEndOffset < p.LeaderHighWatermark || r.HighWatermark < 0 || r.Lag < 0 ||
				(r.Status != status.ReplicaLeader && r.Status != status.ReplicaInSync) {
				return fmt.Sprintf("%s/%d replica %+v", p.Topic, p.Partition, r)
			}
		}
	}
	gi := slices.IndexFunc(v.Groups, func(g status.GroupView) bool { return g.ID == groupID })
	if gi < 0 {
		return fmt.Sprintf("no group %s in %+v", groupID, v.Groups)
	}
	g := v.Groups[gi]
	if len(g.Lag) != partitions || g.TotalLag <= 0 || g.State != "Stable" || len(g.Members) != 1 {
		return fmt.Sprintf("group %+v", g)
	}
	ti := slices.IndexFunc(v.Topics, func(t status.TopicView) bool { return t.Name == topic })
	if ti < 0 || v.Topics[ti].RecordsIn <= 0 || v.Topics[ti].BytesInPerSec <= 0 || v.Topics[ti].RecordsOut <= 0 {
		return fmt.Sprintf("topic rates %+v", v.Topics)
	}
	return ""
}

// agree waits until every node in nodes serves a view that passes check
// and all of them share one fingerprint; it returns the views.
func agree(t *testing.T, nodes []*testproc.Proc, timeout time.Duration, desc string, check func(*status.ClusterView) string) map[int]*status.ClusterView {
	t.Helper()
	var views map[int]*status.ClusterView
	testcluster.WaitFor(t, timeout, desc, func() (bool, string) {
		views = map[int]*status.ClusterView{}
		var first string
		for _, n := range nodes {
			v, err := clusterView(n)
			if err != nil {
				return false, err.Error()
			}
			if v.ObservedBy != int32(n.NodeID()) {
				return false, fmt.Sprintf("node %d's view observed by %d", n.NodeID(), v.ObservedBy)
			}
			if why := check(v); why != "" {
				return false, fmt.Sprintf("node %d: %s", n.NodeID(), why)
			}
			fp := fingerprint(v)
			if first == "" {
				first = fp
			} else if fp != first {
				return false, fmt.Sprintf("views differ:\n%s\n%s", first, fp)
			}
			views[n.NodeID()] = v
		}
		return true, ""
	})
	return views
}

// consumeSome joins the group, reads at least n records (some of every
// partition), commits them and keeps
// the member alive (the group stays Stable with a lag); the client closes
// with the test.
func consumeSome(t *testing.T, c *testcluster.Cluster, n int) {
	t.Helper()
	cl := c.Client(kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, seen := 0, map[int32]bool{}
	for got < n || len(seen) < partitions {
		fs := cl.PollRecords(ctx, n)
		if ctx.Err() != nil {
			t.Fatalf("consuming: %v after %d records from partitions %v", ctx.Err(), got, seen)
		}
		for _, r := range fs.Records() {
			seen[r.Partition] = true
		}
		got += len(fs.Records())
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func TestConsoleThreeNodes(t *testing.T) {
	t0 := time.Now()
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
	c.CreateTopic(topic, partitions, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	load := c.StartLoad(topic, testcluster.LoadOptions{Partitions: []int32{0, 1, 2}, Rate: 200})
	defer load.Abort()
	testcluster.WaitFor(t, 20*time.Second, "300 records acknowledged", func() (bool, string) {
		n := len(load.Acked())
		return n >= 300, fmt.Sprintf("%d acked", n)
	})
	consumeSome(t, c, 150)

	views := agree(t, c.Nodes(), 30*time.Second, "every node's /api/v1/cluster shows the same healthy cluster", healthy)
	v := views[1]
	t.Logf("healthy after %v: controller %d, %s", time.Since(t0).Round(time.Millisecond), v.Controller, fingerprint(v))

	shots := screenshotDir(t)
	chromium := testproc.RequireTool(t, "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
	page := "http://" + c.Node(1).HTTPAddr() + "/status"
	if chromium != "" {
		dom := dumpDOM(t, chromium, page)
		for _, want := range []string{"orders/0", "orders/2", groupID, "active controller", "3 / 3"} {
			if !strings.Contains(dom, want) {
				t.Errorf("rendered console (before) lacks %q", want)
			}
		}
		screenshot(t, chromium, page, shots, "console-before.png")
	}
	// The page as served now, with its embedded snapshot of a healthy
	// cluster, is replayed after the kill by a stand-in server that
	// forwards the page's polls to node 1: only live updates can make it
	// show the dead broker (livePage).
	stale := readPage(t, page)

	// SIGKILL a broker that is neither node 1 (whose console the
	// screenshots show) nor the active controller.
	victim := int32(2)
	if v.Controller == 2 {
		victim = 3
	}
	c.Node(victim).Kill()
	tk := time.Now()
	var others []*testproc.Proc
	for _, n := range c.Nodes() {
		if int32(n.NodeID()) != victim {
			others = append(others, n)
		}
	}
	agree(t, others, 30*time.Second, fmt.Sprintf("the others show node %d fenced and its partitions under-replicated", victim), func(v *status.ClusterView) string {
		bi := slices.IndexFunc(v.Brokers, func(b status.BrokerView) bool { return b.ID == victim })
		if bi < 0 {
			return "victim not listed"
		}
		if b := v.Brokers[bi]; b.Status != status.BrokerFenced || b.Reachable || b.Error == "" {
			return fmt.Sprintf("victim %+v", b)
		}
		if v.Summary.AliveBrokers != 2 {
			return fmt.Sprintf("%d alive", v.Summary.AliveBrokers)
		}
		for _, p := range partitionsOf(v, topic) {
			if !p.UnderReplicated || p.Offline || p.UnderMinISR || slices.Contains(p.ISR, victim) {
				return fmt.Sprintf("partition %+v", p)
			}
			if !slices.Contains(v.Summary.UnderReplicatedPartitions, fmt.Sprintf("%s/%d", p.Topic, p.Partition)) {
				return fmt.Sprintf("summary %+v", v.Summary)
			}
			for _, r := range p.ReplicaStates {
				dead := r.ID == victim
				if dead && (r.Status != status.ReplicaFenced || r.LogEndOffset != -1 || r.Lag != -1) {
					return fmt.Sprintf("dead replica shown as %+v", r)
				}
				if !dead && (r.LogEndOffset < 0 || r.HighWatermark < 0) {
					return fmt.Sprintf("live replica %+v", r)
				}
			}
		}
		return ""
	})
	t.Logf("node %d shown fenced by both others %v after the kill", victim, time.Since(tk).Round(time.Millisecond))

	if chromium != "" {
		dom := dumpDOM(t, chromium, page)
		for _, want := range []string{"dead — no offsets", "under-replicated", "not answering", "2 / 3", "orders/1"} {
			if !strings.Contains(dom, want) {
				t.Errorf("rendered console (after) lacks %q", want)
			}
		}
		if !strings.Contains(dom, fmt.Sprintf("node %d fenced", victim)) {
			t.Errorf("rendered console (after) does not name node %d fenced", victim)
		}
		screenshot(t, chromium, page, shots, "console-after.png")
		if _, w := measuredDOM(t, chromium, c.Node(1).HTTPAddr()); w > 1400 {
			t.Errorf("the console of three nodes, one dead, is %d px wide in a 1400 px window: its tables do not fit", w)
		}

		live := dumpDOM(t, chromium, livePage(t, stale, c.Node(1).HTTPAddr()))
		if !strings.Contains(stale, `"aliveBrokers":3`) || !strings.Contains(live, "2 / 3") || !strings.Contains(live, "dead — no offsets") {
			t.Errorf("the page served before the kill did not update itself from /api/v1/cluster:\n%.3000s", live)
		}
	}
	load.Stop(20 * time.Second)
}

// readPage returns the body of GET url.
func readPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}

// livePage serves page (an old copy of the console, with its old embedded
// snapshot) at /status on 127.0.0.1 and forwards everything else to the
// node at nodeAddr; it returns the page's URL.
func livePage(t *testing.T, page, nodeAddr string) string {
	t.Helper()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: nodeAddr})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, page)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/status"
}
