package handler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicInConsumerGroup makes group "g" of topic "t" (2 partitions) a
// consumer group holding classic member returned (rebalance timeout
// rebalanceMs) and the KIP-848 member "k" that upgraded it: the classic
// member joined and synced the classic group first.
func classicInConsumerGroup(t *testing.T, cl *kgo.Client, rebalanceMs int32) (member string, generation int32) {
	t.Helper()
	createTopic(t, cl, "t", 2, nil)
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Version, sub.Topics = 1, []string{"t"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 7, "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, rebalanceMs
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub.AppendTo(nil)}}
	jr := request[*kmsg.JoinGroupResponse](t, cl, join)
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		join.MemberID = jr.MemberID
		jr = request[*kmsg.JoinGroupResponse](t, cl, join)
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("JoinGroup: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	pt, p := "consumer", "range"
	sync.Group, sync.MemberID, sync.Generation, sync.ProtocolType, sync.Protocol = "g", jr.MemberID, jr.Generation, &pt, &p
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: a.AppendTo(nil)}}
	if sr := request[*kmsg.SyncGroupResponse](t, cl, sync); sr.ErrorCode != 0 {
		t.Fatalf("SyncGroup: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "k", 0, 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := request[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb); r.ErrorCode != 0 {
		t.Fatalf("ConsumerGroupHeartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	return jr.MemberID, jr.Generation
}

// classicMembers lists the members of consumer group g that use the
// classic protocol.
func classicMembers(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g"}
	resp := request[*kmsg.ConsumerGroupDescribeResponse](t, cl, req)
	var out []string
	for _, m := range resp.Groups[0].Members {
		if m.MemberID != "k" {
			out = append(out, m.MemberID)
		}
	}
	return out
}

// TestClassicMemberJoinTimeout: a classic member of a consumer group told
// to rejoin (REBALANCE_IN_PROGRESS) that keeps heartbeating but never
// rejoins is removed once its rebalance timeout passes (Kafka's join
// timeout), instead of holding its partitions for as long as it
// heartbeats.
func TestClassicMemberJoinTimeout(t *testing.T) {
	n := startNode(t, "", kip848Props)
	cl := n.client()
	id, gen := classicInConsumerGroup(t, cl, 1500)
	beat := kmsg.NewPtrHeartbeatRequest()
	beat.Group, beat.MemberID, beat.Generation = "g", id, gen
	first := request[*kmsg.HeartbeatResponse](t, cl, beat).ErrorCode
	if first != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat after the upgrade's epoch bump: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(first))
	}
	start := time.Now()
	for time.Since(start) < 6*time.Second {
		code := request[*kmsg.HeartbeatResponse](t, cl, beat).ErrorCode
		if code == kerr.UnknownMemberID.Code {
			if el := time.Since(start); el < time.Second {
				t.Fatalf("fenced after %v, before its rebalance timeout", el)
			}
			if ms := classicMembers(t, cl); len(ms) != 0 {
				t.Fatalf("classic members left: %v", ms)
			}
			return
		}
		if code != kerr.RebalanceInProgress.Code {
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("a classic member that never rejoined is still in the group after 4 rebalance timeouts")
}

// TestClassicMemberSyncTimeout: a classic member that joins a consumer
// group and never sends its SyncGroup is removed once the rebalance
// timeout of its JoinGroup passes (Kafka's sync timeout), long before its
// session timeout.
func TestClassicMemberSyncTimeout(t *testing.T) {
	n := startNode(t, "", kip848Props)
	cl := n.client()
	id, _ := classicInConsumerGroup(t, cl, 1500)
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Version, sub.Topics = 1, []string{"t"} // owning nothing: no partition to revoke, so no rebalance timer
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.MemberID, join.ProtocolType = 7, "g", id, "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 1500
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub.AppendTo(nil)}}
	if jr := request[*kmsg.JoinGroupResponse](t, cl, join); jr.ErrorCode != 0 {
		t.Fatalf("rejoin: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	start := time.Now()
	for time.Since(start) < 6*time.Second {
		if ms := classicMembers(t, cl); len(ms) == 0 {
			if el := time.Since(start); el < time.Second {
				t.Fatalf("removed after %v, before its rebalance timeout", el)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("a classic member that never synced is still in the group: %v", classicMembers(t, cl))
}

// TestKIP848DowngradeByStaticReplacement: the last KIP-848 member of a
// group, a static one, is replaced by a classic member with its instance
// id (a franz-go consumer restarted with the classic protocol): the
// group goes back to being a classic group at once (Kafka's
// validateOnlineDowngradeWithReplacedMemberId), the new member takes the
// old one's partitions, and every record is consumed.
func TestKIP848DowngradeByStaticReplacement(t *testing.T) {
	props := map[string]string{}
	for k, v := range kip848Props {
		props[k] = v
	}
	props["group.min.session.timeout.ms"] = "1000"
	n := startNode(t, "", props)
	const parts = 4
	r := &migrationRun{t: t, n: n, topic: "replace", group: "replacing", own: &owners{t: t, by: map[int32]string{}},
		seen: map[string]int{}, tenure: map[string]int64{}}
	createTopic(t, n.client(), r.topic, parts, nil)
	prodCtx, stopProducing := context.WithCancel(context.Background())
	produced := 0
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		cl := n.client(kgo.DefaultProduceTopic(r.topic))
		for i := 0; prodCtx.Err() == nil; i++ {
			if err := cl.ProduceSync(ctx(t), kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			produced = i + 1
			time.Sleep(2 * time.Millisecond)
		}
	}()

	c := r.start("classic", false)
	r.waitFor("the classic member holding every partition", func() bool { return r.spread(parts, "classic") })
	k := r.start("static848", true, kgo.InstanceID("s"))
	r.waitFor("the upgraded group spread over both members", func() bool {
		return r.groupType() == "consumer" && r.spread(parts, "classic", "static848")
	})
	r.stop(k) // a static member leaves for a while (epoch -2): its partitions stay assigned to its instance
	s := r.start("staticClassic", false, kgo.InstanceID("s"))
	r.waitFor("the downgraded group spread over the classic members", func() bool {
		return r.groupType() == "classic" && r.spread(parts, "classic", "staticClassic")
	})

	stopProducing()
	<-prodDone
	r.waitFor("every produced record consumed", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := 0; i < produced; i++ {
			if r.seen[fmt.Sprint(i)] == 0 {
				return false
			}
		}
		return true
	})
	r.waitCommitted(parts)
	r.stop(c)
	r.stop(s)
	r.wg.Wait()
}
