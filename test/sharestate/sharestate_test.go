// Package sharestate tests the share coordinator (__share_group_state) on
// real multi-process clusters.
package sharestate

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/sharecoord"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

func tctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// shareCoordinator asks node via FindCoordinator v6 for key's share
// coordinator, retrying while there is none.
func shareCoordinator(t *testing.T, c *testcluster.Cluster, via *testproc.Proc, key string, not int32) int32 {
	t.Helper()
	return findCoordinator(t, via, 2, key, not)
}

// findCoordinator asks via for the coordinator of key of the given
// FindCoordinator key type (0 group, 2 share) until one other than node
// not answers.
func findCoordinator(t *testing.T, via *testproc.Proc, keyType int8, key string, not int32) int32 {
	t.Helper()
	cl := via.Client(t, kgo.RequestRetries(0))
	var node int32 = -1
	testcluster.WaitFor(t, 60*time.Second, "a coordinator for "+key, func() (bool, string) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = 6
		req.CoordinatorType = keyType
		req.CoordinatorKeys = []string{key}
		resp, err := req.RequestWith(tctx(t, 10*time.Second), cl)
		if err != nil {
			return false, err.Error()
		}
		co := resp.Coordinators[0]
		if co.ErrorCode != 0 || co.NodeID == not {
			return false, fmt.Sprintf("coordinator %d, error %v", co.NodeID, kerr.ErrorForCode(co.ErrorCode))
		}
		node = co.NodeID
		return true, ""
	})
	return node
}

// send sends req to node id and returns the response, failing the test on
// a transport error.
func send[R kmsg.Response](t *testing.T, c *testcluster.Cluster, id int32, req kmsg.Request) R {
	t.Helper()
	cl := c.Node(id).Client(t, kgo.RequestRetries(0))
	resp, err := cl.Request(tctx(t, 30*time.Second), req)
	if err != nil {
		t.Fatalf("%T to node %d: %v", req, id, err)
	}
	return resp.(R)
}

// sendState sends a share state request to node id until its partition
// answers something other than a coordinator error that goes away.
func sendState[R kmsg.Response](t *testing.T, c *testcluster.Cluster, id int32, req kmsg.Request, code func(R) int16) R {
	t.Helper()
	var resp R
	testcluster.WaitFor(t, 60*time.Second, fmt.Sprintf("an answer to %T", req), func() (bool, string) {
		resp = send[R](t, c, id, req)
		switch err := kerr.ErrorForCode(code(resp)); err {
		case kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.NotCoordinator:
			return false, err.Error()
		}
		return true, ""
	})
	return resp
}

func writeReq(group string, id [16]byte, stateEpoch, leaderEpoch int32, start int64, bs ...share.StateBatch) *kmsg.WriteShareGroupStateRequest {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = id
	p := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	p.StateEpoch, p.LeaderEpoch, p.StartOffset, p.DeliveryCompleteCount = stateEpoch, leaderEpoch, start, -1
	for _, b := range bs {
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
		p.StateBatches = append(p.StateBatches, sb)
	}
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)
	return req
}

func readReq(group string, id [16]byte, leaderEpoch int32) *kmsg.ReadShareGroupStateRequest {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = id
	p := kmsg.NewReadShareGroupStateRequestTopicPartition()
	p.LeaderEpoch = leaderEpoch
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)
	return req
}

func writeCode(r *kmsg.WriteShareGroupStateResponse) int16 {
	return r.Topics[0].Partitions[0].ErrorCode
}
func readCode(r *kmsg.ReadShareGroupStateResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }

// TestShareStateSurvivesCoordinatorKill writes share state through the
// share coordinator of a 3-node cluster (__share_group_state at RF 3,
// min.insync.replicas 2), SIGKILLs the coordinator, and reads the same
// state, still fencing the old leader epoch, from the new one. It also
// sets a start offset with AlterShareGroupOffsets sent to a node that is
// not the coordinator (the broker's Persister forwards it over the
// inter-broker client) and describes it after the kill.
func TestShareStateSurvivesCoordinatorKill(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{
		"share.coordinator.state.topic.num.partitions":           "3",
		"share.coordinator.snapshot.update.records.per.snapshot": "3",
	}})
	const group, topic = "durable-share", "durable-share-topic"
	c.CreateTopic(topic, 1, 3, nil, nil)
	cl := c.Client()
	for i := range 10 {
		if err := cl.ProduceSync(tctx(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var topicID [16]byte
	{
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(tctx(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, mt := range resp.Topics {
			if mt.Topic != nil && *mt.Topic == topic {
				topicID = mt.TopicID
			}
		}
	}
	key := sharecoord.CoordinatorKey(share.Key{Group: group, TopicID: topicID, Partition: 0})
	coord := shareCoordinator(t, c, c.Nodes()[0], key, -1)
	t.Logf("share coordinator of %s: node %d", key, coord)

	// AlterShareGroupOffsets goes to the group's coordinator (it creates
	// the share group there), which reaches the share coordinator through
	// the Persister, over the network when that is another node.
	other := findCoordinator(t, c.Nodes()[0], 0, group, -1)
	t.Logf("group coordinator of %s: node %d", group, other)
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = group
	at := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	at.Topic = topic
	ap := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	ap.StartOffset = 2
	at.Partitions = append(at.Partitions, ap)
	alter.Topics = append(alter.Topics, at)
	ar := send[*kmsg.AlterShareGroupOffsetsResponse](t, c, other, alter)
	if ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("alter via node %d: %v / %v", other, kerr.ErrorForCode(ar.ErrorCode), kerr.ErrorForCode(ar.Topics[0].Partitions[0].ErrorCode))
	}

	// The share partition's leader reads (leader epoch 4) and writes.
	rr := sendState(t, c, coord, readReq(group, topicID, 4), readCode)
	if p := rr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StartOffset != 2 || p.StateEpoch != 1 {
		t.Fatalf("read: %+v", p)
	}
	// Each write acknowledges one more record (delivered once); the
	// records after it were delivered once and released.
	var want []share.StateBatch
	for i := range int64(7) {
		want = []share.StateBatch{
			{FirstOffset: 2, LastOffset: 2 + i, DeliveryState: share.StateAcknowledged, DeliveryCount: 1},
			{FirstOffset: 3 + i, LastOffset: 9, DeliveryState: share.StateAvailable, DeliveryCount: 1},
		}
		if code := writeCode(sendState(t, c, coord, writeReq(group, topicID, 1, 4, 2, want...), writeCode)); code != 0 {
			t.Fatalf("write %d: %v", i, kerr.ErrorForCode(code))
		}
	}

	c.Node(coord).Kill()
	via := int32(1)
	if via == coord {
		via = 2
	}
	next := shareCoordinator(t, c, c.Node(via), key, coord)
	t.Logf("after killing node %d the share coordinator is node %d", coord, next)

	if code := writeCode(sendState(t, c, next, writeReq(group, topicID, 1, 3, 2), writeCode)); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("after the kill, a write from leader epoch 3: %v", kerr.ErrorForCode(code))
	}
	rr = sendState(t, c, next, readReq(group, topicID, 5), readCode)
	p := rr.Topics[0].Partitions[0]
	var got []share.StateBatch
	for _, b := range p.StateBatches {
		got = append(got, share.StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
	}
	if p.StartOffset != 2 || p.StateEpoch != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("state after the kill: start %d epoch %d batches %v, want start 2 epoch 1 batches %v", p.StartOffset, p.StateEpoch, got, want)
	}

	// DescribeShareGroupOffsets from the group's coordinator, which moves
	// if it was the node killed.
	if other == coord {
		other = findCoordinator(t, c.Node(via), 0, group, coord)
	}
	dr := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = group
	dr.Groups = append(dr.Groups, dg)
	var start int64 = -1
	testcluster.WaitFor(t, 30*time.Second, "describe after the kill", func() (bool, string) {
		resp := send[*kmsg.DescribeShareGroupOffsetsResponse](t, c, other, dr)
		for _, rt := range resp.Groups[0].Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == topic && rp.ErrorCode == 0 {
					start = rp.StartOffset
					return true, ""
				}
				return false, kerr.ErrorForCode(rp.ErrorCode).Error()
			}
		}
		return false, "not described"
	})
	if start != 2 {
		t.Fatalf("described start offset %d, want 2", start)
	}
}
