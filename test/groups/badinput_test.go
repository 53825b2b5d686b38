package groups

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// raw sends requests to one node as they are, with no coordinator
// routing or retries by the client.
type raw struct {
	c  *cluster
	t  *testing.T
	cl *kgo.Client
	id int32
}

func (c *cluster) raw(id int32, opts ...kgo.Opt) *raw {
	cl := c.Client(append([]kgo.Opt{kgo.SeedBrokers(c.Node(id).Addr()), kgo.RequestRetries(0)}, opts...)...)
	// Learn the node ids.
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(tctx(c.t, 10*time.Second), cl); err != nil {
		c.t.Fatal(err)
	}
	return &raw{c: c, t: c.t, cl: cl, id: id}
}

// version returns r sending requests of key at most at version v.
func (r *raw) version(key, v int16) *raw {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(key, v)
	return r.c.raw(r.id, kgo.MaxVersions(vs))
}

func do[R kmsg.Response](r *raw, req kmsg.Request) R {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := r.cl.Broker(int(r.id)).Request(ctx, req)
	if err != nil {
		r.t.Fatalf("%T to node %d: %v", req, r.id, err)
	}
	return resp.(R)
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func joinReq(group, member, topic string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID = group, member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	req.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", consumerMeta(topic)
	req.Protocols = append(req.Protocols, p)
	return req
}

func (r *raw) join(group, topic string) *kmsg.JoinGroupResponse {
	r.t.Helper()
	resp := do[*kmsg.JoinGroupResponse](r, joinReq(group, "", topic))
	if resp.ErrorCode != kerr.MemberIDRequired.Code {
		r.t.Fatalf("first join: %v, want MEMBER_ID_REQUIRED", kerr.ErrorForCode(resp.ErrorCode))
	}
	resp = do[*kmsg.JoinGroupResponse](r, joinReq(group, resp.MemberID, topic))
	if resp.ErrorCode != 0 {
		r.t.Fatalf("join: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
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

func (r *raw) heartbeat(group, member string, gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	return do[*kmsg.HeartbeatResponse](r, req).ErrorCode
}

// commit commits offset to each of partitions of topic and returns the
// per-partition error codes.
func (r *raw) commit(version int16, group, member string, gen int32, topic string, offset int64, partitions ...int32) []int16 {
	r.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	if version < req.MaxVersion() {
		r = r.version(req.Key(), version)
	}
	req.Group, req.MemberID, req.Generation = group, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := do[*kmsg.OffsetCommitResponse](r, req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(partitions) {
		r.t.Fatalf("commit response shape: %+v", resp.Topics)
	}
	var out []int16
	for _, p := range resp.Topics[0].Partitions {
		out = append(out, p.ErrorCode)
	}
	return out
}

func (r *raw) fetchOffset(group, topic string, partition int32) int64 {
	r.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp := do[*kmsg.OffsetFetchResponse](r.version(req.Key(), 7), req) // v8+ batches groups
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		r.t.Fatalf("offset fetch: %v %+v", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
	return resp.Topics[0].Partitions[0].Offset
}

func expect(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Errorf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	} else {
		t.Logf("%s: %v", what, kerr.ErrorForCode(got))
	}
}

// TestBadGroupRequests sends malformed or out-of-date group requests,
// raw, to the nodes of a three-broker cluster and checks Kafka's error
// codes: requests to a node that is not the coordinator, unknown member
// ids, stale generations, SyncGroup assignments from a non-leader, and
// commits for partitions that do not exist.
func TestBadGroupRequests(t *testing.T) {
	c := startCluster(t)
	const topic, group = "bad", "bad-group"
	c.CreateTopic(topic, 3, 3, nil, nil)
	coord, err := c.coordinator(c.Client(), group)
	if err != nil {
		t.Fatal(err)
	}
	r := c.raw(coord)
	other := c.raw(coord%3 + 1)

	// Not the coordinator.
	expect(t, "JoinGroup to another node", do[*kmsg.JoinGroupResponse](other, joinReq(group, "", topic)).ErrorCode, kerr.NotCoordinator)
	expect(t, "Heartbeat to another node", other.heartbeat(group, "x", 1), kerr.NotCoordinator)
	expect(t, "SyncGroup to another node", do[*kmsg.SyncGroupResponse](other, syncReq(group, "x", 1, nil)).ErrorCode, kerr.NotCoordinator)
	expect(t, "OffsetCommit to another node", other.commit(8, group, "", -1, topic, 1, 0)[0], kerr.NotCoordinator)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = group
	expect(t, "OffsetFetch v7 to another node", do[*kmsg.OffsetFetchResponse](other.version(of.Key(), 7), of).ErrorCode, kerr.NotCoordinator)
	of8 := kmsg.NewPtrOffsetFetchRequest()
	of8.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group}}
	ofr := do[*kmsg.OffsetFetchResponse](other, of8)
	if len(ofr.Groups) != 1 {
		t.Fatalf("OffsetFetch v8: %+v", ofr)
	}
	expect(t, "OffsetFetch v8+ to another node", ofr.Groups[0].ErrorCode, kerr.NotCoordinator)

	// One member, generation 1.
	a := r.join(group, topic)
	if a.Generation != 1 || a.LeaderID != a.MemberID {
		t.Fatalf("first member: generation %d, leader %s (self %s)", a.Generation, a.LeaderID, a.MemberID)
	}
	s := do[*kmsg.SyncGroupResponse](r, syncReq(group, a.MemberID, 1, map[string]string{a.MemberID: "A1"}))
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "A1" {
		t.Fatalf("leader sync: %v %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
	}

	// Unknown member ids.
	expect(t, "Heartbeat, unknown member", r.heartbeat(group, "nobody", 1), kerr.UnknownMemberID)
	expect(t, "SyncGroup, unknown member", do[*kmsg.SyncGroupResponse](r, syncReq(group, "nobody", 1, nil)).ErrorCode, kerr.UnknownMemberID)
	expect(t, "OffsetCommit, unknown member", r.commit(8, group, "nobody", 1, topic, 1, 0)[0], kerr.UnknownMemberID)
	expect(t, "JoinGroup, unknown member", do[*kmsg.JoinGroupResponse](r, joinReq(group, "nobody", topic)).ErrorCode, kerr.UnknownMemberID)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = group, "nobody"
	expect(t, "LeaveGroup v0, unknown member", do[*kmsg.LeaveGroupResponse](r.version(leave.Key(), 0), leave).ErrorCode, kerr.UnknownMemberID)
	leave = kmsg.NewPtrLeaveGroupRequest()
	leave.Group = group
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "nobody"}}
	lr := do[*kmsg.LeaveGroupResponse](r, leave)
	if lr.ErrorCode != 0 || len(lr.Members) != 1 {
		t.Fatalf("LeaveGroup v3+: %+v", lr)
	}
	expect(t, "LeaveGroup v4, unknown member", lr.Members[0].ErrorCode, kerr.UnknownMemberID)
	// A group this node coordinates that does not exist.
	unknown := ""
	for i := 0; unknown == ""; i++ {
		if id, err := c.coordinator(c.Client(), fmt.Sprintf("no-such-group-%d", i)); err == nil && id == coord {
			unknown = fmt.Sprintf("no-such-group-%d", i)
		}
	}
	expect(t, "Heartbeat, unknown group", r.heartbeat(unknown, a.MemberID, 1), kerr.UnknownMemberID)
	expect(t, "SyncGroup, unknown group", do[*kmsg.SyncGroupResponse](r, syncReq(unknown, a.MemberID, 1, nil)).ErrorCode, kerr.UnknownMemberID)
	expect(t, "OffsetCommit, unknown group, generation 1", r.commit(8, unknown, a.MemberID, 1, topic, 1, 0)[0], kerr.IllegalGeneration)

	// Commits of partitions that do not exist: the others in the request
	// are committed.
	codes := r.commit(8, group, a.MemberID, 1, topic, 7, 0, 3, -1, 2)
	expect(t, "OffsetCommit partition 0", codes[0], nil)
	expect(t, "OffsetCommit partition 3 of 3", codes[1], kerr.UnknownTopicOrPartition)
	expect(t, "OffsetCommit partition -1", codes[2], kerr.UnknownTopicOrPartition)
	expect(t, "OffsetCommit partition 2", codes[3], nil)
	expect(t, "OffsetCommit v2 (kafka-go), partition 99", r.commit(2, group, a.MemberID, 1, topic, 7, 99)[0], kerr.UnknownTopicOrPartition)
	expect(t, "OffsetCommit, unknown topic", r.commit(8, group, a.MemberID, 1, "no-such-topic", 7, 0)[0], kerr.UnknownTopicOrPartition)
	if o := r.fetchOffset(group, topic, 0); o != 7 {
		t.Errorf("partition 0 committed %d, want 7", o)
	}
	if o := r.fetchOffset(group, topic, 3); o != -1 {
		t.Errorf("nonexistent partition 3 has committed offset %d", o)
	}

	// A second member joins: generation 2, A stays the leader.
	bFirst := do[*kmsg.JoinGroupResponse](r, joinReq(group, "", topic))
	if bFirst.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("B first join: %v", kerr.ErrorForCode(bFirst.ErrorCode))
	}
	bID := bFirst.MemberID
	bJoin := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { bJoin <- do[*kmsg.JoinGroupResponse](r, joinReq(group, bID, topic)) }()
	deadline := time.Now().Add(10 * time.Second)
	for r.heartbeat(group, a.MemberID, 1) != kerr.RebalanceInProgress.Code {
		if time.Now().After(deadline) {
			t.Fatal("A's heartbeat never reported REBALANCE_IN_PROGRESS")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a2 := do[*kmsg.JoinGroupResponse](r, joinReq(group, a.MemberID, topic))
	b2 := <-bJoin
	if a2.ErrorCode != 0 || b2.ErrorCode != 0 || a2.Generation != 2 || b2.Generation != 2 || a2.LeaderID != a.MemberID {
		t.Fatalf("rejoin: A %v gen %d, B %v gen %d, leader %s", kerr.ErrorForCode(a2.ErrorCode), a2.Generation, kerr.ErrorForCode(b2.ErrorCode), b2.Generation, a2.LeaderID)
	}

	// Stale generation, between join and sync.
	expect(t, "Heartbeat, generation 1 of 2", r.heartbeat(group, a.MemberID, 1), kerr.IllegalGeneration)
	expect(t, "SyncGroup, generation 1 of 2", do[*kmsg.SyncGroupResponse](r, syncReq(group, bID, 1, nil)).ErrorCode, kerr.IllegalGeneration)
	expect(t, "OffsetCommit, generation 2 before sync", r.commit(8, group, a.MemberID, 2, topic, 8, 0)[0], kerr.RebalanceInProgress)

	// B, not the leader, syncs first with assignments of its own: they
	// are ignored, B waits for the leader's.
	bSync := make(chan *kmsg.SyncGroupResponse, 1)
	go func() {
		bSync <- do[*kmsg.SyncGroupResponse](r, syncReq(group, bID, 2, map[string]string{bID: "EVIL-B", a.MemberID: "EVIL-A"}))
	}()
	select {
	case s := <-bSync:
		t.Fatalf("non-leader SyncGroup answered before the leader synced: %v %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
	case <-time.After(300 * time.Millisecond):
	}
	aSync := do[*kmsg.SyncGroupResponse](r, syncReq(group, a.MemberID, 2, map[string]string{a.MemberID: "A2", bID: "B2"}))
	bs := <-bSync
	if aSync.ErrorCode != 0 || string(aSync.MemberAssignment) != "A2" || bs.ErrorCode != 0 || string(bs.MemberAssignment) != "B2" {
		t.Fatalf("sync: A %v %q, B %v %q; want A2 and B2", kerr.ErrorForCode(aSync.ErrorCode), aSync.MemberAssignment, kerr.ErrorForCode(bs.ErrorCode), bs.MemberAssignment)
	}
	t.Logf("non-leader SyncGroup assignments ignored: B got %q", bs.MemberAssignment)
	// Again while Stable: B gets its assignment, not what it sends.
	bs = do[*kmsg.SyncGroupResponse](r, syncReq(group, bID, 2, map[string]string{bID: "EVIL-B2"}))
	if bs.ErrorCode != 0 || string(bs.MemberAssignment) != "B2" {
		t.Errorf("non-leader SyncGroup while Stable: %v %q, want B2", kerr.ErrorForCode(bs.ErrorCode), bs.MemberAssignment)
	}

	// Stale generation, once Stable.
	expect(t, "Heartbeat, generation 1 of 2 (Stable)", r.heartbeat(group, bID, 1), kerr.IllegalGeneration)
	expect(t, "OffsetCommit, generation 1 of 2", r.commit(8, group, bID, 1, topic, 9, 1)[0], kerr.IllegalGeneration)
	expect(t, "OffsetCommit v2, generation 3 of 2", r.commit(2, group, bID, 3, topic, 9, 1)[0], kerr.IllegalGeneration)
	expect(t, "SyncGroup, generation 3 of 2", do[*kmsg.SyncGroupResponse](r, syncReq(group, bID, 3, nil)).ErrorCode, kerr.IllegalGeneration)
	expect(t, "OffsetCommit, simple (generation -1) to a group with members", r.commit(8, group, "", -1, topic, 9, 1)[0], kerr.UnknownMemberID)
	expect(t, "OffsetCommit, current generation", r.commit(8, group, bID, 2, topic, 9, 1)[0], nil)
	if o := r.fetchOffset(group, topic, 1); o != 9 {
		t.Errorf("partition 1 committed %d, want 9", o)
	}
	expect(t, "Heartbeat, current generation", r.heartbeat(group, bID, 2), nil)
}
