// Package scale runs a real three-process cluster with many partitions and
// checks the controller at that size (docs/controller.md, "Batching and
// limits"): after a broker is SIGKILLed, every partition it led has a new
// leader within broker.session.timeout.ms + 2 s; after it restarts it is
// back in every ISR within a minute. The raft entries the active
// controller wrote for the failover are read from its /metrics.
//
// Run: go test ./test/scale/ -v -count=1                 (small: 600 partitions, CI)
//
//	go test ./test/scale/ -v -count=1 -scale.full -timeout 30m   (30,000 partitions)
package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

var (
	full       = flag.Bool("scale.full", false, "run at full size: 30,000 partitions (needs a raised open-file limit)")
	partitions = flag.Int("scale.partitions", 0, "partitions to create (default 600, or 30,000 with -scale.full)")
)

func TestMain(m *testing.M) { testproc.Main(m) }

const sessionMs = 4000

// TestFailoverAtScale: 3 nodes, RF 3, N partitions; SIGKILL a broker that
// is not the active controller.
func TestFailoverAtScale(t *testing.T) {
	n := 600
	if *full {
		n = 30000
	}
	if *partitions > 0 {
		n = *partitions
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{
		"broker.session.timeout.ms":    strconv.Itoa(sessionMs),
		"broker.heartbeat.interval.ms": "500",
		"replica.lag.time.max.ms":      "5000",
		"default.replication.factor":   "3",
		"min.insync.replicas":          "2",
		// Keep leadership where the failover put it while we measure.
		"auto.leader.rebalance.enable": "false",
	}, StartTimeout: 2 * time.Minute})
	ad := c.Admin()
	defer ad.Close()
	// A node answers CreateTopics once it has opened the new partitions
	// itself: 10,000 logs on disk take many seconds.
	ad.SetTimeoutMillis(120000)
	// CreateTopics takes at most 10,000 partitions per request
	// (metadata.MaxPartitionsPerRequest): one topic per 10,000.
	var topics []string
	t0 := time.Now()
	for left, i := n, 0; left > 0; i++ {
		k := min(left, metadata.MaxPartitionsPerRequest)
		name := fmt.Sprintf("scale%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		rs, err := ad.CreateTopics(ctx, int32(k), 3, nil, name)
		cancel()
		if err == nil && errors.Is(rs[name].Err, kerr.TopicAlreadyExists) {
			// The client retried a create that had been committed.
			t.Logf("create %s: %v on a retry", name, rs[name].Err)
		} else if err != nil || rs[name].Err != nil {
			t.Fatalf("create %s (%d partitions): %v %v", name, k, err, rs[name].Err)
		}
		topics = append(topics, name)
		left -= k
	}
	t.Logf("%d partitions (RF 3) created in %v", n, time.Since(t0))
	waitAll(t, c, topics, 5*time.Minute, "every ISR full", func(p testcluster.PartitionMeta) bool { return len(p.ISR) == 3 && p.Leader >= 0 })
	t.Logf("every ISR full %v after the first create", time.Since(t0))

	ctl := activeController(t, c)
	victim := int32(1)
	for victim == ctl {
		victim++
	}
	led := map[string]map[int32]bool{}
	total := 0
	for _, tp := range topics {
		m, err := c.Meta(tp)
		if err != nil {
			t.Fatal(err)
		}
		led[tp] = map[int32]bool{}
		for i, p := range m {
			if p.Leader == victim {
				led[tp][i] = true
				total++
			}
		}
	}
	e0 := metric(t, c.Node(ctl), "sluice_controller_metadata_entries_total")
	r0 := metric(t, c.Node(ctl), "sluice_controller_metadata_records_total")
	t.Logf("SIGKILL broker %d (leader of %d partitions); active controller %d", victim, total, ctl)
	kill := time.Now()
	c.Node(victim).Kill()
	budget := sessionMs*time.Millisecond + 2*time.Second
	waitAll(t, c, topics, budget+10*time.Second, "a new leader for every partition the killed broker led", func(p testcluster.PartitionMeta) bool {
		return p.Leader >= 0 && p.Leader != victim
	})
	took := time.Since(kill)
	e1 := metric(t, c.Node(ctl), "sluice_controller_metadata_entries_total")
	r1 := metric(t, c.Node(ctl), "sluice_controller_metadata_records_total")
	t.Logf("every partition led elsewhere %v after the kill (budget %v): the controller wrote %d entries, %d records", took, budget, int(e1-e0), int(r1-r0))
	if took > budget {
		t.Fatalf("new leaders %v after the kill; want within broker.session.timeout.ms + 2 s = %v", took, budget)
	}
	if maxEntries := float64(n/10000 + 3); e1-e0 > maxEntries {
		t.Fatalf("the failover took %d raft entries; want at most %d", int(e1-e0), int(maxEntries))
	}

	restart := time.Now()
	c.Node(victim).Restart()
	waitAll(t, c, topics, time.Minute, "the restarted broker back in every ISR", func(p testcluster.PartitionMeta) bool {
		for _, r := range p.ISR {
			if r == victim {
				return true
			}
		}
		return false
	})
	e2 := metric(t, c.Node(ctl), "sluice_controller_metadata_entries_total")
	t.Logf("broker %d back in every ISR %v after the restart began (the controller wrote %d entries)", victim, time.Since(restart), int(e2-e1))
}

// waitAll polls the partitions of every topic (from any live node) until
// cond holds for all of them.
func waitAll(t *testing.T, c *testcluster.Cluster, topics []string, timeout time.Duration, what string, cond func(testcluster.PartitionMeta) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		bad := 0
		for _, tp := range topics {
			m, err := c.Meta(tp)
			if err != nil {
				bad, last = -1, err.Error()
				break
			}
			for i, p := range m {
				if !cond(p) {
					if bad == 0 {
						last = fmt.Sprintf("%s/%d: %v", tp, i, p)
					}
					bad++
				}
			}
		}
		if bad == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %d partitions not yet (e.g. %s)", timeout, what, bad, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// activeController asks node 1's /api/v1/node which node is the active
// controller.
func activeController(t *testing.T, c *testcluster.Cluster) int32 {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + c.Node(1).HTTPAddr() + "/api/v1/node")
		if err != nil {
			continue
		}
		var v struct {
			Controller int32 `json:"controller"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err == nil && v.Controller > 0 {
			return v.Controller
		}
	}
	t.Fatal("no active controller known")
	return -1
}

// metric reads one counter from a node's /metrics.
func metric(t *testing.T, p *testproc.Proc, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s not in node %d's /metrics", name, p.NodeID())
	return 0
}
