package handler_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerMeta is a "consumer" protocol subscription to topics.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func joinReq(group, member string, instance *string, topics ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.InstanceID = group, member, instance
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 6000, 6000
	req.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", consumerMeta(topics...)
	req.Protocols = append(req.Protocols, p)
	return req
}

// join performs the KIP-394 dance: MEMBER_ID_REQUIRED, then the real join.
func join(t *testing.T, cl *kgo.Client, group string, topics ...string) *kmsg.JoinGroupResponse {
	t.Helper()
	r := request[*kmsg.JoinGroupResponse](t, cl, joinReq(group, "", nil, topics...))
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("first join: error %v member %q, want MEMBER_ID_REQUIRED with an id", kerr.ErrorForCode(r.ErrorCode), r.MemberID)
	}
	r = request[*kmsg.JoinGroupResponse](t, cl, joinReq(group, r.MemberID, nil, topics...))
	if r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	return r
}

func syncReq(group, member string, gen int32, assign map[string]string) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	for m, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return req
}

func heartbeat(t *testing.T, cl *kgo.Client, group, member string, gen int32, instance *string) int16 {
	t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, member, gen, instance
	return request[*kmsg.HeartbeatResponse](t, cl, req).ErrorCode
}

func commit(t *testing.T, cl *kgo.Client, group, member string, gen int32, topic string, partition int32, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return request[*kmsg.OffsetCommitResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Errorf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestGroupErrors drives the coordinator with raw requests and checks
// Kafka's error codes for bad input.
func TestGroupErrors(t *testing.T) {
	n := startNode(t, "", groupProps)
	cl := pinned(n, 8, 9) // commits name topics (v10 takes ids)
	createTopic(t, cl, "t", 2, nil)
	const g = "raw-group"

	a := join(t, cl, g, "t")
	if a.LeaderID != a.MemberID || a.Generation != 1 || len(a.Members) != 1 {
		t.Fatalf("single member join: %+v", a)
	}
	sync := request[*kmsg.SyncGroupResponse](t, cl, syncReq(g, a.MemberID, 1, map[string]string{a.MemberID: "A1"}))
	if sync.ErrorCode != 0 || string(sync.MemberAssignment) != "A1" {
		t.Fatalf("leader sync: %v %q", kerr.ErrorForCode(sync.ErrorCode), sync.MemberAssignment)
	}

	wantCode(t, "heartbeat", heartbeat(t, cl, g, a.MemberID, 1, nil), nil)
	wantCode(t, "heartbeat unknown member", heartbeat(t, cl, g, "nobody", 1, nil), kerr.UnknownMemberID)
	wantCode(t, "heartbeat stale generation", heartbeat(t, cl, g, a.MemberID, 0, nil), kerr.IllegalGeneration)
	wantCode(t, "heartbeat unknown group", heartbeat(t, cl, "no-such-group", a.MemberID, 1, nil), kerr.UnknownMemberID)

	wantCode(t, "commit", commit(t, cl, g, a.MemberID, 1, "t", 0, 5), nil)
	wantCode(t, "commit stale generation", commit(t, cl, g, a.MemberID, 0, "t", 0, 6), kerr.IllegalGeneration)
	wantCode(t, "commit unknown member", commit(t, cl, g, "nobody", 1, "t", 0, 6), kerr.UnknownMemberID)
	wantCode(t, "commit missing partition", commit(t, cl, g, a.MemberID, 1, "t", 7, 6), kerr.UnknownTopicOrPartition)
	wantCode(t, "commit missing topic", commit(t, cl, g, a.MemberID, 1, "nope", 0, 6), kerr.UnknownTopicOrPartition)
	wantCode(t, "simple commit to a group with members", commit(t, cl, g, "", -1, "t", 0, 6), kerr.UnknownMemberID)
	wantCode(t, "simple commit", commit(t, cl, "simple", "", -1, "t", 1, 9), nil)

	// Bad joins.
	bad := joinReq(g, "", nil, "t")
	bad.SessionTimeoutMillis = 10
	wantCode(t, "join short session", request[*kmsg.JoinGroupResponse](t, cl, bad).ErrorCode, kerr.InvalidSessionTimeout)
	wantCode(t, "join empty group id", request[*kmsg.JoinGroupResponse](t, cl, joinReq("", "", nil)).ErrorCode, kerr.InvalidGroupID)
	bad = joinReq(g, "", nil, "t")
	bad.ProtocolType = "connect"
	wantCode(t, "join other protocol type", request[*kmsg.JoinGroupResponse](t, cl, bad).ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "join unknown member", request[*kmsg.JoinGroupResponse](t, cl, joinReq(g, "nobody", nil, "t")).ErrorCode, kerr.UnknownMemberID)

	// A second member: both rejoin, B is not the leader. B's SyncGroup
	// carries assignments that must be ignored.
	bResp := request[*kmsg.JoinGroupResponse](t, cl, joinReq(g, "", nil, "t"))
	if bResp.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("B first join: %v", kerr.ErrorForCode(bResp.ErrorCode))
	}
	bID := bResp.MemberID
	bJoin := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		r, err := cl.Request(ctx(t), joinReq(g, bID, nil, "t"))
		if err != nil {
			t.Error(err)
		}
		bJoin <- r.(*kmsg.JoinGroupResponse)
	}()
	// A learns of the rebalance from its heartbeat, then rejoins.
	deadline := time.Now().Add(10 * time.Second)
	for heartbeat(t, cl, g, a.MemberID, 1, nil) != kerr.RebalanceInProgress.Code {
		if time.Now().After(deadline) {
			t.Fatal("heartbeat never reported REBALANCE_IN_PROGRESS")
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCode(t, "commit during rebalance (still generation 1)", commit(t, cl, g, a.MemberID, 1, "t", 0, 6), nil)
	a2 := request[*kmsg.JoinGroupResponse](t, cl, joinReq(g, a.MemberID, nil, "t"))
	b2 := <-bJoin
	if a2.ErrorCode != 0 || b2.ErrorCode != 0 || a2.Generation != 2 || b2.Generation != 2 {
		t.Fatalf("rejoin: A %v gen %d, B %v gen %d", kerr.ErrorForCode(a2.ErrorCode), a2.Generation, kerr.ErrorForCode(b2.ErrorCode), b2.Generation)
	}
	if a2.LeaderID != a.MemberID || len(a2.Members) != 2 || len(b2.Members) != 0 {
		t.Fatalf("leader %s (A is %s), A sees %d members, B sees %d", a2.LeaderID, a.MemberID, len(a2.Members), len(b2.Members))
	}
	wantCode(t, "commit between join and sync", commit(t, cl, g, a.MemberID, 2, "t", 0, 7), kerr.RebalanceInProgress)
	bSync := make(chan *kmsg.SyncGroupResponse, 1)
	go func() {
		r, err := cl.Request(ctx(t), syncReq(g, bID, 2, map[string]string{bID: "EVIL-B", a.MemberID: "EVIL-A"}))
		if err != nil {
			t.Error(err)
		}
		bSync <- r.(*kmsg.SyncGroupResponse)
	}()
	// B's SyncGroup is parked: the coordinator has taken it and holds
	// it (a follower answered at once, before the leader's assignment,
	// never parks).
	for deadline := time.Now().Add(10 * time.Second); n.h.Groups().WaitingSync(g) != 1; time.Sleep(time.Millisecond) {
		select {
		case r := <-bSync:
			t.Fatalf("non-leader SyncGroup answered before the leader's: %v %q", kerr.ErrorForCode(r.ErrorCode), r.MemberAssignment)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("B's SyncGroup never parked")
		}
	}
	aSync := request[*kmsg.SyncGroupResponse](t, cl, syncReq(g, a.MemberID, 2, map[string]string{a.MemberID: "A2", bID: "B2"}))
	bs := <-bSync
	if aSync.ErrorCode != 0 || string(aSync.MemberAssignment) != "A2" || bs.ErrorCode != 0 || string(bs.MemberAssignment) != "B2" {
		t.Fatalf("sync: A %v %q, B %v %q", kerr.ErrorForCode(aSync.ErrorCode), aSync.MemberAssignment, kerr.ErrorForCode(bs.ErrorCode), bs.MemberAssignment)
	}
	wantCode(t, "sync stale generation", request[*kmsg.SyncGroupResponse](t, cl, syncReq(g, bID, 1, nil)).ErrorCode, kerr.IllegalGeneration)
	wantCode(t, "sync unknown member", request[*kmsg.SyncGroupResponse](t, cl, syncReq(g, "nobody", 2, nil)).ErrorCode, kerr.UnknownMemberID)

	// Deleting.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{g, "no-such-group", "simple"}
	dr := request[*kmsg.DeleteGroupsResponse](t, cl, del)
	wantCode(t, "delete group with members", dr.Groups[0].ErrorCode, kerr.NonEmptyGroup)
	wantCode(t, "delete unknown group", dr.Groups[1].ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "delete empty group", dr.Groups[2].ErrorCode, nil)

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = g
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic = "t"
	odt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	od.Topics = append(od.Topics, odt)
	odr := request[*kmsg.OffsetDeleteResponse](t, cl, od)
	if odr.ErrorCode != 0 || odr.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code {
		t.Errorf("offset delete of a subscribed topic: %v / %v", kerr.ErrorForCode(odr.ErrorCode), kerr.ErrorForCode(odr.Topics[0].Partitions[0].ErrorCode))
	}

	// Both leave (v3+ batch); the group is empty and can be deleted.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = g
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a.MemberID}, {MemberID: bID}, {MemberID: "nobody"}}
	lr := request[*kmsg.LeaveGroupResponse](t, cl, leave)
	if lr.ErrorCode != 0 || len(lr.Members) != 3 || lr.Members[0].ErrorCode != 0 || lr.Members[1].ErrorCode != 0 || lr.Members[2].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %+v", lr)
	}
	odr = request[*kmsg.OffsetDeleteResponse](t, cl, od)
	wantCode(t, "offset delete in empty group", odr.Topics[0].Partitions[0].ErrorCode, nil)
	del.Groups = []string{g}
	wantCode(t, "delete emptied group", request[*kmsg.DeleteGroupsResponse](t, cl, del).Groups[0].ErrorCode, nil)
}

// TestStaticMembership checks KIP-345: a static member rejoining with an
// unknown member id takes over without a rebalance; its old id is fenced.
func TestStaticMembership(t *testing.T) {
	n := startNode(t, "", groupProps)
	cl := pinned(n, 8, 9) // commits name topics (v10 takes ids)
	createTopic(t, cl, "s", 1, nil)
	const g = "static-group"
	inst := "instance-1"
	r := request[*kmsg.JoinGroupResponse](t, cl, joinReq(g, "", &inst, "s"))
	if r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("static join: %v gen %d", kerr.ErrorForCode(r.ErrorCode), r.Generation)
	}
	oldID := r.MemberID
	s := request[*kmsg.SyncGroupResponse](t, cl, syncReq(g, oldID, 1, map[string]string{oldID: "P0"}))
	wantCode(t, "sync", s.ErrorCode, nil)

	// The "restarted" instance joins with no member id.
	r2 := request[*kmsg.JoinGroupResponse](t, cl, joinReq(g, "", &inst, "s"))
	if r2.ErrorCode != 0 || r2.Generation != 1 || r2.MemberID == oldID || r2.LeaderID == r2.MemberID {
		t.Fatalf("static rejoin: %v gen %d member %s leader %s (old %s)", kerr.ErrorForCode(r2.ErrorCode), r2.Generation, r2.MemberID, r2.LeaderID, oldID)
	}
	s2 := request[*kmsg.SyncGroupResponse](t, cl, syncReq(g, r2.MemberID, 1, nil))
	if s2.ErrorCode != 0 || string(s2.MemberAssignment) != "P0" {
		t.Fatalf("sync after static rejoin: %v %q", kerr.ErrorForCode(s2.ErrorCode), s2.MemberAssignment)
	}
	wantCode(t, "old member id heartbeat", heartbeat(t, cl, g, oldID, 1, &inst), kerr.FencedInstanceID)
	wantCode(t, "new member id heartbeat", heartbeat(t, cl, g, r2.MemberID, 1, &inst), nil)
	wantCode(t, "old member id commit", func() int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation, req.InstanceID = g, oldID, 1, &inst
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "s"
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
		req.Topics = append(req.Topics, rt)
		return request[*kmsg.OffsetCommitResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}(), kerr.FencedInstanceID)

	// Describe, list (with a states filter) and find the coordinator (v4 batch).
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{g, "unknown"}
	dr := request[*kmsg.DescribeGroupsResponse](t, cl, dg)
	if dr.Groups[0].State != "Stable" || len(dr.Groups[0].Members) != 1 || *dr.Groups[0].Members[0].InstanceID != inst || dr.Groups[1].State != "Dead" {
		t.Fatalf("describe: %+v", dr.Groups)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.StatesFilter = []string{"stable"}
	lr := request[*kmsg.ListGroupsResponse](t, cl, lg)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != g || lr.Groups[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", lr.Groups)
	}
	lg.StatesFilter = []string{"Empty"}
	if lr := request[*kmsg.ListGroupsResponse](t, cl, lg); len(lr.Groups) != 0 {
		t.Fatalf("list empty groups: %+v", lr.Groups)
	}
	// v5 (KIP-848): the group type, and a types filter.
	lg.StatesFilter, lg.TypesFilter = nil, []string{"Classic"}
	if lr := request[*kmsg.ListGroupsResponse](t, cl, lg); len(lr.Groups) != 1 || lr.Groups[0].GroupType != "classic" {
		t.Fatalf("list classic groups: %+v", lr.Groups)
	}
	lg.TypesFilter = []string{"consumer", "share"}
	if lr := request[*kmsg.ListGroupsResponse](t, cl, lg); len(lr.Groups) != 0 {
		t.Fatalf("list consumer and share groups: %+v", lr.Groups)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{g, "other"}
	fr := request[*kmsg.FindCoordinatorResponse](t, cl, fc)
	if len(fr.Coordinators) != 2 || fr.Coordinators[0].NodeID != n.b.NodeID() || fr.Coordinators[1].ErrorCode != 0 {
		t.Fatalf("find coordinator: %+v", fr.Coordinators)
	}
}
