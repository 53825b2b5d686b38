package handler_test

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func alterShareReq(group, topic string, part int32, start int64) *kmsg.AlterShareGroupOffsetsRequest {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	rp.Partition, rp.StartOffset = part, start
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// describeShare returns group's start offset and lag of topic's partition
// (-1, -1 if it is not in the response), describing every topic when all.
func describeShareOffsets(t *testing.T, cl *kgo.Client, group, topic string, all bool) (start, lag int64) {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	if !all {
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic = topic
		rt.Partitions = []int32{0}
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	resp := request[*kmsg.DescribeShareGroupOffsetsResponse](t, cl, req)
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		t.Fatalf("describe: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	for _, rt := range g.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == topic && rp.Partition == 0 {
				if rp.ErrorCode != 0 {
					t.Fatalf("describe %s/0: %v", topic, kerr.ErrorForCode(rp.ErrorCode))
				}
				return rp.StartOffset, rp.Lag
			}
		}
	}
	return -1, -1
}

// TestShareGroupOffsetsAdminAPIs alters, describes and deletes a share
// group's offsets with AlterShareGroupOffsets, DescribeShareGroupOffsets
// and DeleteShareGroupOffsets (the flow of franz-go's
// TestShareGroupOffsetsAdmin), and checks that a group with members
// cannot be altered.
func TestShareGroupOffsetsAdminAPIs(t *testing.T) {
	n := startNode(t, "", shareProps)
	cl := n.client()
	const topic, group = "share-admin", "share-admin-group"
	createTopic(t, cl, topic, 1, nil)
	for i := range 20 {
		if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	resp := request[*kmsg.AlterShareGroupOffsetsResponse](t, cl, alterShareReq(group, topic, 0, 8))
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("alter: %v / %v", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	if start, lag := describeShareOffsets(t, cl, group, topic, false); start != 8 || lag != 12 {
		t.Fatalf("describe: start %d lag %d, want 8 and 12", start, lag)
	}
	if start, _ := describeShareOffsets(t, cl, group, topic, true); start != 8 {
		t.Fatalf("describe all topics: start %d, want 8", start)
	}
	// Altering again bumps the state epoch (a new initialization).
	request[*kmsg.AlterShareGroupOffsetsResponse](t, cl, alterShareReq(group, topic, 0, 3))
	if start, _ := describeShareOffsets(t, cl, group, topic, false); start != 3 {
		t.Fatalf("describe after second alter: start %d, want 3", start)
	}
	// Bad input.
	if r := request[*kmsg.AlterShareGroupOffsetsResponse](t, cl, alterShareReq(group, "nope", 0, 3)); r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("alter of an unknown topic: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	if r := request[*kmsg.AlterShareGroupOffsetsResponse](t, cl, alterShareReq(group, topic, 0, -5)); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("alter to a negative offset: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}

	// A group with members: NON_EMPTY_GROUP, nothing changes.
	n.h.SetShareGroupState(func(g string) (bool, bool, *kerr.Error) { return g != group, true, nil })
	if r := request[*kmsg.AlterShareGroupOffsetsResponse](t, cl, alterShareReq(group, topic, 0, 1)); r.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter of a non-empty group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if start, _ := describeShareOffsets(t, cl, group, topic, false); start != 3 {
		t.Fatalf("a refused alter changed the start offset to %d", start)
	}
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = group
	dt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	dt.Topic = topic
	del.Topics = append(del.Topics, dt)
	if r := request[*kmsg.DeleteShareGroupOffsetsResponse](t, cl, del); r.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete of a non-empty group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	n.h.SetShareGroupState(func(string) (bool, bool, *kerr.Error) { return true, true, nil })

	r := request[*kmsg.DeleteShareGroupOffsetsResponse](t, cl, del)
	if r.ErrorCode != 0 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %v / %v", kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	if start, _ := describeShareOffsets(t, cl, group, topic, false); start != -1 {
		t.Fatalf("describe after delete: start %d, want -1", start)
	}
	if start, _ := describeShareOffsets(t, cl, group, topic, true); start != -1 {
		t.Fatalf("describe all after delete: start %d, want the partition left out", start)
	}
}

// TestShareStateAuthorization: with an authorizer and no ACLs, the share
// coordinator's RPCs and FindCoordinator's share keys need CLUSTER_ACTION
// (CLUSTER_AUTHORIZATION_FAILED), the offsets APIs their GROUP operation
// (GROUP_AUTHORIZATION_FAILED); nothing is created or changed.
func TestShareStateAuthorization(t *testing.T) {
	n := startNode(t, "", map[string]string{"authorizer.class.name": standardAuthorizer})
	cl := n.client()
	id := [16]byte{5}
	denied := kerr.ClusterAuthorizationFailed.Code
	if c := initCode(request[*kmsg.InitializeShareGroupStateResponse](t, cl, initReq("g", id, 0, 0, 0))); c != denied {
		t.Errorf("InitializeShareGroupState: %v", kerr.ErrorForCode(c))
	}
	if c := readCode(request[*kmsg.ReadShareGroupStateResponse](t, cl, readReq("g", id, 0, 0))); c != denied {
		t.Errorf("ReadShareGroupState: %v", kerr.ErrorForCode(c))
	}
	if c := writeCode(request[*kmsg.WriteShareGroupStateResponse](t, cl, writeReq("g", id, 0, 0, 0, 0))); c != denied {
		t.Errorf("WriteShareGroupState: %v", kerr.ErrorForCode(c))
	}
	if c := deleteCode(request[*kmsg.DeleteShareGroupStateResponse](t, cl, deleteReq("g", id, 0))); c != denied {
		t.Errorf("DeleteShareGroupState: %v", kerr.ErrorForCode(c))
	}
	if c := summaryCode(request[*kmsg.ReadShareGroupStateSummaryResponse](t, cl, summaryReq("g", id, 0))); c != denied {
		t.Errorf("ReadShareGroupStateSummary: %v", kerr.ErrorForCode(c))
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 6, 2, []string{"g:AAAAAAAAAAAAAAAAAAAAAA:0"}
	if c := request[*kmsg.FindCoordinatorResponse](t, cl, fc).Coordinators[0].ErrorCode; c != denied {
		t.Errorf("FindCoordinator share key: %v", kerr.ErrorForCode(c))
	}
	// The offsets APIs straight to the node: the client would look for the
	// group's coordinator first, which is refused too.
	direct := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(int(n.b.NodeID())).Request(ctx(t), req)
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		return resp
	}
	if r := direct(alterShareReq("g", "t", 0, 1)).(*kmsg.AlterShareGroupOffsetsResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("AlterShareGroupOffsets: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	d := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = "g"
	d.Groups = append(d.Groups, dg)
	if r := direct(d).(*kmsg.DescribeShareGroupOffsetsResponse); r.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("DescribeShareGroupOffsets: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "g"
	if r := direct(del).(*kmsg.DeleteShareGroupOffsetsResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("DeleteShareGroupOffsets: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if n.b.Image().Topics["__share_group_state"] != nil {
		t.Error("refused requests created __share_group_state")
	}
}
