package status_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/status"
)

// openBroker opens a single-node broker on a temporary data dir, closed
// when the test ends.
func openBroker(t *testing.T) *broker.Broker {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:1"
	b, err := broker.Open(broker.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// newServer starts a status server on b, closed when the test ends.
func newServer(t *testing.T, b *broker.Broker) *status.Server {
	t.Helper()
	s := status.New(status.Options{Broker: b, Version: "test-1"})
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPartitionsAPIAndMetrics(t *testing.T) {
	b := openBroker(t)
	if err := b.CreateTopic("st", 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	p, _ := b.Leader("st", 1)
	data := batchtest.Build(batchtest.Options{}, batchtest.Values("a", "b", "c"))
	h, _ := batch.ParseHeader(data)
	res := <-p.Produce(data, h, -1, time.Now().Add(5*time.Second))
	if res.Error != 0 {
		t.Fatal(res.Error)
	}
	b.CountProduce("st", int64(len(data)), 3)
	srv := httptest.NewServer(newServer(t, b).Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/v1/partitions")
	if err != nil {
		t.Fatal(err)
	}
	var parts []status.Partition
	if err := json.NewDecoder(resp.Body).Decode(&parts); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(parts) != 2 || parts[1].Partition != 1 || parts[1].HighWatermark != 3 || parts[1].LogEndOffset != 3 ||
		parts[1].Leader != 1 || len(parts[1].ReplicaStates) != 1 || parts[1].ReplicaStates[0].LogEndOffset != 3 ||
		parts[1].Role != "leader" || parts[1].LeaderHighWatermark != 3 || parts[1].ReplicaStates[0].Status != status.ReplicaLeader ||
		parts[1].ReplicaStates[0].Lag != 0 || parts[1].UnderReplicated || parts[1].Offline || parts[1].LastStableOffset == nil || *parts[1].LastStableOffset != 3 {
		t.Fatalf("%+v", parts)
	}
	resp, err = srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"sluice_under_replicated_partitions", "sluice_offline_partitions", "sluice_isr_shrinks_total",
		"sluice_isr_expands_total", "sluice_leader_elections_total", "sluice_partition_high_watermark", "go_goroutines",
		`sluice_topic_records_in_total{topic="st"} 3`} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	resp, err = srv.Client().Get(srv.URL + "/status")
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(err, resp.StatusCode)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The console embeds its first snapshot and loads nothing from
	// elsewhere (no CDN): no src= or href= to another origin.
	for _, want := range []string{`"topic":"st"`, "/api/v1/cluster", "<script>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("console page lacks %q", want)
		}
	}
	for _, bad := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "@import"} {
		if strings.Contains(string(page), bad) {
			t.Errorf("console page loads an external asset (%q)", bad)
		}
	}
}

func TestClusterEndpoints(t *testing.T) {
	b := openBroker(t)
	if err := b.CreateTopic("orders", 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	b.CountProduce("orders", 100, 2)
	s := status.New(status.Options{Broker: b, Version: "v-test", Groups: func() []group.Summary {
		return []group.Summary{{ID: "g1", State: "Empty", Offsets: []group.CommittedOffset{{Topic: "orders", Partition: 1, Offset: 0}}}}
	}})
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string, into any) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %s %s", path, resp.Status, resp.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var cv status.ClusterView
	get("/api/v1/cluster", &cv)
	if cv.ObservedBy != 1 || cv.Controller != 1 || cv.GeneratedAtMs <= 0 || cv.Transactions == nil || len(cv.Partitions) != 2 ||
		cv.Summary.Brokers != 1 || cv.Summary.AliveBrokers != 1 || cv.Summary.Topics != 1 {
		t.Fatalf("cluster %+v", cv)
	}
	var brokers []status.BrokerView
	get("/api/v1/brokers", &brokers)
	if len(brokers) != 1 || brokers[0].Status != status.BrokerAlive || !brokers[0].Controller || brokers[0].Version != "v-test" || brokers[0].Leaders != 2 {
		t.Fatalf("brokers %+v", brokers)
	}
	var topics []status.TopicView
	get("/api/v1/topics", &topics)
	if len(topics) != 1 || topics[0].Name != "orders" || topics[0].Partitions != 2 || topics[0].BytesIn != 100 || topics[0].MinISR != 1 {
		t.Fatalf("topics %+v", topics)
	}
	var groups []status.GroupView
	get("/api/v1/groups", &groups)
	if len(groups) != 1 || groups[0].ID != "g1" || groups[0].Coordinator != 1 || len(groups[0].Lag) != 1 || groups[0].Lag[0].Lag != 0 {
		t.Fatalf("groups %+v", groups)
	}
	var node status.NodeView
	get("/api/v1/node", &node)
	if node.NodeID != 1 || node.Version != "v-test" || len(node.Partitions) != 2 || node.Topics["orders"].RecordsIn != 2 {
		t.Fatalf("node %+v", node)
	}
	// The partitions view keeps the old fields: a replica state per
	// replica, this node's role and offsets.
	var raw []map[string]any
	get("/api/v1/partitions", &raw)
	for _, k := range []string{"topic", "partition", "leader", "leaderEpoch", "replicas", "isr", "role", "logStartOffset",
		"logEndOffset", "highWatermark", "replicaStates", "lastStableOffset", "underReplicated"} {
		if _, ok := raw[0][k]; !ok {
			t.Errorf("/api/v1/partitions lacks %q", k)
		}
	}
}

// TestDirtyRatio: a compacted topic's partitions carry their dirty ratio
// in /api/v1/partitions (1 for a log never cleaned, with sealed segments
// below the HW); other topics carry none.
func TestDirtyRatio(t *testing.T) {
	b := openBroker(t)
	if err := b.CreateTopic("changelog", 1, 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "200"}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic("plain", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	p, _ := b.Leader("changelog", 0)
	for i := 0; i < 5; i++ {
		data := batchtest.Build(batchtest.Options{}, []batchtest.Record{{Key: []byte("k"), Value: []byte("value-value-value-value")}})
		h, _ := batch.ParseHeader(data)
		if res := <-p.Produce(data, h, -1, time.Now().Add(5*time.Second)); res.Error != 0 {
			t.Fatal(res.Error)
		}
	}
	srv := httptest.NewServer(newServer(t, b).Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/v1/partitions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var parts []status.Partition
	if err := json.NewDecoder(resp.Body).Decode(&parts); err != nil {
		t.Fatal(err)
	}
	got := map[string]*float64{}
	for _, p := range parts {
		got[p.Topic] = p.DirtyRatio
	}
	if r := got["changelog"]; r == nil || *r != 1 {
		t.Fatalf("changelog dirty ratio %v, want 1", r)
	}
	if r := got["plain"]; r != nil {
		t.Fatalf("plain topic has a dirty ratio %v", *r)
	}
}

// The Go profiles are served only with Options.Debug
// (sluice.http.debug.enable); /metrics and the console always.
func TestDebugEndpointsOff(t *testing.T) {
	b := openBroker(t)
	for _, debug := range []bool{false, true} {
		st := status.New(status.Options{Broker: b, Debug: debug})
		srv := httptest.NewServer(st.Handler())
		want := map[string]int{"/debug/pprof/": http.StatusNotFound, "/metrics": http.StatusOK, "/status": http.StatusOK}
		if debug {
			want["/debug/pprof/"] = http.StatusOK
		}
		for path, code := range want {
			resp, err := srv.Client().Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != code {
				t.Errorf("debug=%v GET %s: %d, want %d", debug, path, resp.StatusCode, code)
			}
		}
		srv.Close()
		st.Close()
	}
}

// /healthz answers while the process serves; /readyz tells whether the
// broker is registered and active in the metadata.
func TestHealthEndpoints(t *testing.T) {
	b := openBroker(t)
	st := newServer(t, b)
	srv := httptest.NewServer(st.Handler())
	defer srv.Close()
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != want {
			t.Errorf("GET %s: %d %q, want 200 %q", path, resp.StatusCode, body, want)
		}
	}
}
