package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// 3 as offline. reassign plan's output is a valid, balanced plan for the
// brokers given; executing it for rf3 reorders the replicas at once (the
// ISR holds them all), status then lists nothing and cancel has nothing
// to cancel; elect moves leadership to the new preferred replicas.
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

	electAndReassign(t, b)

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
	// The table form, from whichever broker answers: a broker may apply
	// the controller's fencing of broker 3 a moment after another.
	testWait(t, 10*time.Second, "the status table shows the kill", func() bool {
		r = ok(t, "", "cluster", "status", b)
		return strings.Contains(r.stdout, "3 under-replicated, 1 offline") && strings.Contains(r.stdout, "Offline partitions:") && row(r.stdout, "on3", "0") != nil
	})
}

// electAndReassign: reassign plan gives a valid, balanced plan of the
// cluster's topics; reassign execute/status/cancel and elect work.
func electAndReassign(t *testing.T, b string) {
	r := ok(t, "", "reassign", "plan", "--brokers", "1,2,3", "--topics", "rf3,on3", b)
	var plan struct {
		Version    int `json:"version"`
		Partitions []struct {
			Topic     string  `json:"topic"`
			Partition int32   `json:"partition"`
			Replicas  []int32 `json:"replicas"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil || plan.Version != 1 || len(plan.Partitions) != 4 {
		t.Fatalf("reassign plan: %v\n%s", err, r)
	}
	replicas, leaders := map[int32]int{}, map[int32]int{}
	for _, p := range plan.Partitions {
		want := 3
		if p.Topic == "on3" {
			want = 1
		}
		if rs := slices.Compact(slices.Sorted(slices.Values(p.Replicas))); len(rs) != want || len(p.Replicas) != want || rs[0] < 1 || rs[len(rs)-1] > 3 {
			t.Errorf("planned %s-%d on %v", p.Topic, p.Partition, p.Replicas)
		}
		leaders[p.Replicas[0]]++
		for _, id := range p.Replicas {
			replicas[id]++
		}
	}
	// 10 replicas, 4 leaders on 3 brokers.
	for id := int32(1); id <= 3; id++ {
		if replicas[id] < 3 || replicas[id] > 4 || leaders[id] < 1 || leaders[id] > 2 {
			t.Errorf("plan not balanced: replicas %v leaders %v", replicas, leaders)
		}
	}
	if !strings.Contains(r.stderr, "BROKER  REPLICAS  LEADERS") {
		t.Errorf("plan summary:\n%s", r)
	}
	// Execute the plan for rf3 only (on3 must stay on broker 3 for the
	// rest of the test).
	var rf3 []any
	for _, p := range plan.Partitions {
		if p.Topic == "rf3" {
			rf3 = append(rf3, p)
		}
	}
	data, _ := json.Marshal(map[string]any{"version": 1, "partitions": rf3})
	file := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r = ok(t, "", "reassign", "execute", file, b)
	for p := range 3 {
		if f := row(r.stdout, "rf3", fmt.Sprint(p)); f == nil || !strings.Contains(r.stdout, "reassignment started") {
			t.Errorf("reassign execute: no result for rf3-%d:\n%s", p, r)
		}
	}
	testWait(t, 20*time.Second, "rf3 on the planned replicas", func() bool {
		var desc topicJSON
		jsonOut(t, &desc, "topic", "describe", "rf3", b)
		for _, p := range desc.Topics[0].Partitions {
			for _, q := range plan.Partitions {
				if q.Topic == "rf3" && q.Partition == p.Partition && !slices.Equal(q.Replicas, p.Replicas) {
					return false
				}
			}
		}
		return true
	})
	r = ok(t, "", "reassign", "status", b)
	if !strings.Contains(r.stdout, "No reassignment in progress.") {
		t.Errorf("reassign status:\n%s", r)
	}
	fails(t, 1, "NO_REASSIGNMENT_IN_PROGRESS", "reassign", "cancel", file, b)
	// Leadership follows the new preferred replicas on request.
	r = ok(t, "", "elect", "--topic", "rf3", b)
	for p := range 3 {
		if row(r.stdout, "rf3", fmt.Sprint(p)) == nil {
			t.Errorf("elect: no result for rf3-%d:\n%s", p, r)
		}
	}
	// The broker answering describe may apply the new leaders a moment
	// after the controller committed them.
	testWait(t, 10*time.Second, "rf3 led by its preferred replicas after elect", func() bool {
		var desc topicJSON
		jsonOut(t, &desc, "topic", "describe", "rf3", b)
		for _, p := range desc.Topics[0].Partitions {
			if p.Leader != p.Replicas[0] {
				t.Logf("after elect: rf3-%d led by %d, replicas %v", p.Partition, p.Leader, p.Replicas)
				return false
			}
		}
		return true
	})

	fails(t, 1, "broker 9 is not in the cluster", "reassign", "plan", "--brokers", "1,9", "--topics", "rf3", b)
	fails(t, 1, "replication factor 3 with 2 brokers", "reassign", "plan", "--brokers", "1,2", "--topics", "rf3", b)
	fails(t, 2, "sluice reassign plan --brokers", "reassign", "plan", "--topics", "rf3", b)
	fails(t, 2, "sluice elect --topic T", "elect", "--topic", "rf3", "--type", "dirty", b)
}
