package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestElectAllAndController, on three processes: `cluster status` names
// the metadata quorum's leader as the controller whichever broker it asks
// (Metadata's controller id is the answering broker); after replicas are
// reordered, `elect --all-topic-partitions` (preferred by default) moves
// the leadership of every partition of every topic to its first replica.
func TestElectAllAndController(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: clusterProps})
	b := "--bootstrap-server=" + strings.Join(c.Addrs(false), ",")

	// The active controller, as a separate client sees it.
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), c.Client())
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].LeaderID < 1 {
		t.Fatalf("DescribeQuorum: %v %+v", err, resp)
	}
	leader := resp.Topics[0].Partitions[0].LeaderID
	for _, id := range []int32{1, 2, 3} {
		var st clusterJSON
		jsonOut(t, &st, "cluster", "status", "--bootstrap", c.Node(id).Addr())
		marked := 0
		for _, br := range st.Brokers {
			if br.Controller {
				marked++
				if br.ID != leader {
					t.Errorf("asking broker %d: broker %d marked controller, the quorum leader is %d", id, br.ID, leader)
				}
			}
		}
		if st.Controller != leader || marked != 1 {
			t.Errorf("asking broker %d: controller %d (%d marked), the quorum leader is %d", id, st.Controller, marked, leader)
		}
	}

	c.CreateTopic("ea", 3, 3, nil, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	c.CreateTopic("eb", 1, 3, nil, [][]int32{{1, 2, 3}})
	c.WaitTopicReady("ea", 3, 20*time.Second)
	c.WaitTopicReady("eb", 1, 20*time.Second)
	// Reverse every replica list: same replicas, so the reassignment ends
	// at once and the leaders stay where they were.
	adm := c.Admin()
	var reassign kadm.AlterPartitionAssignmentsReq
	reassign.Assign("ea", 0, []int32{3, 2, 1})
	reassign.Assign("ea", 1, []int32{1, 3, 2})
	reassign.Assign("ea", 2, []int32{2, 1, 3})
	reassign.Assign("eb", 0, []int32{3, 2, 1})
	res, err := adm.AlterPartitionAssignments(ctxT(t), reassign)
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterPartitionAssignments: %v %v", err, res.Error())
	}
	notPreferred := map[string]bool{}
	testWait(t, 20*time.Second, "the reversed replica lists", func() bool {
		clear(notPreferred)
		for _, topic := range []string{"ea", "eb"} {
			var desc topicJSON
			jsonOut(t, &desc, "topic", "describe", topic, b)
			for _, p := range desc.Topics[0].Partitions {
				if p.Replicas[0] == 1 && topic == "ea" && p.Partition == 0 || p.Replicas[0] == 1 && topic == "eb" {
					return false // not reordered yet
				}
				if p.Leader != p.Replicas[0] {
					notPreferred[fmt.Sprintf("%s-%d", topic, p.Partition)] = true
				}
			}
		}
		return true
	})
	if len(notPreferred) == 0 {
		t.Fatal("every partition is led by its preferred replica after the reordering")
	}

	var el struct {
		Type    string `json:"type"`
		Results []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Result    string `json:"result"`
		} `json:"results"`
	}
	jsonOut(t, &el, "elect", "--all-topic-partitions", b)
	elected := map[string]bool{}
	for _, r := range el.Results {
		if r.Result == "elected" {
			elected[fmt.Sprintf("%s-%d", r.Topic, r.Partition)] = true
		}
	}
	for tp := range notPreferred {
		if !elected[tp] {
			t.Errorf("elect --all-topic-partitions: %s (not led by its preferred replica) not elected: %+v", tp, el)
		}
	}
	if el.Type != "preferred" {
		t.Errorf("elect --all-topic-partitions type %q, want preferred", el.Type)
	}
	testWait(t, 10*time.Second, "every partition led by its preferred replica", func() bool {
		for _, topic := range []string{"ea", "eb"} {
			var desc topicJSON
			jsonOut(t, &desc, "topic", "describe", topic, b)
			for _, p := range desc.Topics[0].Partitions {
				if p.Leader != p.Replicas[0] {
					return false
				}
			}
		}
		return true
	})
	ok(t, "", "elect", "--all-topic-partitions", b)
	fails(t, 2, "--topic or --all-topic-partitions", "elect", "--all-topic-partitions", "--topic", "ea", b)
	fails(t, 2, "--topic or --all-topic-partitions", "elect", b)
}
