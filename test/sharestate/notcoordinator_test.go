package sharestate

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// sendTo sends req to node id itself (a kgo client's Request would route
// the group APIs to the coordinator it finds, and FindCoordinator to any
// broker) and returns the response.
func sendTo[R kmsg.Response](t *testing.T, c *testcluster.Cluster, id int32, req kmsg.Request) R {
	t.Helper()
	cl := c.Client()
	defer cl.Close()
	resp, err := cl.Broker(int(id)).Request(tctx(t, 30*time.Second), req)
	if err != nil {
		t.Fatalf("%T to node %d: %v", req, id, err)
	}
	return resp.(R)
}

// coordinatorAt asks node id for group's coordinator until it names one.
func coordinatorAt(t *testing.T, c *testcluster.Cluster, id int32, group string) int32 {
	t.Helper()
	var node int32 = -1
	testcluster.WaitFor(t, 60*time.Second, fmt.Sprintf("node %d naming a coordinator for %s", id, group), func() (bool, string) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 0
		req.CoordinatorKeys = []string{group}
		co := sendTo[*kmsg.FindCoordinatorResponse](t, c, id, req).Coordinators[0]
		node = co.NodeID
		return co.ErrorCode == 0, fmt.Sprint(kerr.ErrorForCode(co.ErrorCode))
	})
	return node
}

func describeShareReq(group string) *kmsg.DescribeShareGroupOffsetsRequest {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = group
	req.Groups = append(req.Groups, g)
	return req
}

func deleteShareReq(group, topic string) *kmsg.DeleteShareGroupOffsetsRequest {
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = group
	t := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	t.Topic = topic
	req.Topics = append(req.Topics, t)
	return req
}

func alterShareReq(group, topic string, start int64) *kmsg.AlterShareGroupOffsetsRequest {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	t := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	t.Topic = topic
	p := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	p.StartOffset = start
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// TestShareOffsetsNotCoordinator sends DescribeShareGroupOffsets (90),
// AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) to every
// node of a 3-node cluster right after __consumer_offsets is created: the
// nodes that are not the group's coordinator (as FindCoordinator names
// it) answer NOT_COORDINATOR, as Kafka's GroupCoordinatorService does, so
// that clients find the coordinator again; the coordinator serves them,
// and kadm, which finds the coordinator itself, describes the offsets
// altered.
func TestShareOffsetsNotCoordinator(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{
		"offsets.topic.num.partitions":                 "6",
		"share.coordinator.state.topic.num.partitions": "3",
	}})
	const topic = "share-notcoord"
	c.CreateTopic(topic, 1, 3, nil, nil)
	// Several groups so that the coordinators spread over the nodes;
	// the first FindCoordinator creates __consumer_offsets.
	groups := []string{"g-a", "g-b", "g-c", "g-d", "g-e", "g-f"}
	coords := map[string]int32{}
	for _, g := range groups {
		coords[g] = coordinatorAt(t, c, 1, g)
	}
	// Every node names the same coordinator.
	for _, g := range groups {
		for id := int32(2); id <= 3; id++ {
			testcluster.WaitFor(t, 30*time.Second, fmt.Sprintf("node %d naming the coordinator of %s", id, g), func() (bool, string) {
				got := coordinatorAt(t, c, id, g)
				return got == coords[g], fmt.Sprintf("names %d, node 1 named %d", got, coords[g])
			})
		}
	}
	var others int
	for _, g := range groups {
		coord := coords[g]
		for id := int32(1); id <= 3; id++ {
			if id == coord {
				continue
			}
			others++
			dr := sendTo[*kmsg.DescribeShareGroupOffsetsResponse](t, c, id, describeShareReq(g))
			if code := dr.Groups[0].ErrorCode; code != kerr.NotCoordinator.Code {
				t.Errorf("DescribeShareGroupOffsets of %s at node %d (coordinator %d): %v, want NOT_COORDINATOR", g, id, coord, kerr.ErrorForCode(code))
			}
			xr := sendTo[*kmsg.DeleteShareGroupOffsetsResponse](t, c, id, deleteShareReq(g, topic))
			if xr.ErrorCode != kerr.NotCoordinator.Code {
				t.Errorf("DeleteShareGroupOffsets of %s at node %d (coordinator %d): %v, want NOT_COORDINATOR", g, id, coord, kerr.ErrorForCode(xr.ErrorCode))
			}
			ar := sendTo[*kmsg.AlterShareGroupOffsetsResponse](t, c, id, alterShareReq(g, topic, 0))
			if ar.ErrorCode != kerr.NotCoordinator.Code {
				t.Errorf("AlterShareGroupOffsets of %s at node %d (coordinator %d): %v / %v, want NOT_COORDINATOR", g, id, coord, kerr.ErrorForCode(ar.ErrorCode), kerr.ErrorForCode(ar.Topics[0].Partitions[0].ErrorCode))
			}
		}
	}
	if others == 0 {
		t.Fatal("no request went to a node that is not the coordinator")
	}

	// The coordinator serves them: an unknown group is GROUP_ID_NOT_FOUND,
	// an alter creates it.
	g := groups[0]
	coord := coords[g]
	testcluster.WaitFor(t, 30*time.Second, "delete at the coordinator", func() (bool, string) {
		xr := sendTo[*kmsg.DeleteShareGroupOffsetsResponse](t, c, coord, deleteShareReq(g, topic))
		return xr.ErrorCode == kerr.GroupIDNotFound.Code, fmt.Sprint(kerr.ErrorForCode(xr.ErrorCode))
	})
	testcluster.WaitFor(t, 30*time.Second, "alter at the coordinator", func() (bool, string) {
		ar := sendTo[*kmsg.AlterShareGroupOffsetsResponse](t, c, coord, alterShareReq(g, topic, 0))
		code := ar.ErrorCode
		if code == 0 && len(ar.Topics) == 0 {
			return false, "no topics in the response"
		}
		if code == 0 {
			code = ar.Topics[0].Partitions[0].ErrorCode
		}
		return code == 0, fmt.Sprint(kerr.ErrorForCode(code))
	})
	// A real client finds the coordinator and describes the group.
	cl := c.Client(kgo.RequestRetries(10))
	defer cl.Close()
	req := describeShareReq(g)
	resp, err := req.RequestWith(tctx(t, 30*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Groups[0].ErrorCode; code != 0 {
		t.Fatalf("DescribeShareGroupOffsets through the client: %v", kerr.ErrorForCode(code))
	}
}
