package consumer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// timerOf returns the timer of kind for member in ts.
func timerOf(ts []Timer, kind TimerKind, member string) (Timer, bool) {
	for _, t := range ts {
		if t.Kind == kind && t.Member == member {
			return t, true
		}
	}
	return Timer{}, false
}

// classicJoinReq is a classic member's JoinGroup on "g" owning nothing.
func classicJoinReq(id string, instance *string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID, req.InstanceID, req.ProtocolType = 7, "g", id, instance, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 20000
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: classicSub()}}
	return req
}

// TestClassicMemberTimers: a classic member told to rejoin gets a join
// timer (kept, not pushed back, by later heartbeats), its JoinGroup
// cancels it and arms a sync timer of the request's rebalance timeout,
// its SyncGroup cancels that; either timer firing fences the member, as
// Kafka's join and sync timeouts of classic members in a consumer group.
func TestClassicMemberTimers(t *testing.T) {
	mgr, img, now, _ := upgraded(t, MigrationBidirectional)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "g", "c", 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = 30000, []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp, _ := mgr.Heartbeat(now, img, Client{ID: "c"}, hb); resp.ErrorCode != 0 {
		t.Fatalf("848 join: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	beat := kmsg.NewPtrHeartbeatRequest()
	beat.Group, beat.MemberID, beat.Generation = "g", "a", 5
	code, ts := mgr.ClassicHeartbeat(now, beat)
	jt, ok := timerOf(ts, JoinTimer, "a")
	if code != kerr.RebalanceInProgress.Code || !ok || !jt.IfAbsent || jt.Cancel || !jt.At.Equal(now.Add(30*time.Second)) {
		t.Fatalf("heartbeat told to rejoin: %v, join timer %+v (%v): want one at the rebalance timeout, if absent", kerr.ErrorForCode(code), jt, ok)
	}

	// b rejoins: its join timer goes, a sync timer comes.
	resp, res := mgr.ClassicJoin(now, img, Client{ID: "b"}, classicJoinReq("b", nil))
	if resp.ErrorCode != 0 {
		t.Fatalf("join of b: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if jt, ok := timerOf(res.Timers, JoinTimer, "b"); !ok || !jt.Cancel {
		t.Fatalf("join of b: join timer %+v (%v), want cancelled", jt, ok)
	}
	st, ok := timerOf(res.Timers, SyncTimer, "b")
	if !ok || st.Cancel || !st.At.Equal(now.Add(20*time.Second)) {
		t.Fatalf("join of b: sync timer %+v (%v), want at the join's rebalance timeout", st, ok)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	pt, p := "consumer", "cooperative-sticky"
	sync.Group, sync.MemberID, sync.Generation, sync.ProtocolType, sync.Protocol = "g", "b", resp.Generation, &pt, &p
	sresp, ts := mgr.ClassicSync(now, img, sync)
	if st, ok := timerOf(ts, SyncTimer, "b"); sresp.ErrorCode != 0 || !ok || !st.Cancel {
		t.Fatalf("sync of b: %v, sync timer %+v (%v), want cancelled", kerr.ErrorForCode(sresp.ErrorCode), st, ok)
	}
	// a's SyncGroup at its old generation is REBALANCE_IN_PROGRESS and
	// arms its join timer too.
	sync.MemberID, sync.Generation = "a", 5
	if sresp, ts := mgr.ClassicSync(now, img, sync); sresp.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync of a: %v", kerr.ErrorForCode(sresp.ErrorCode))
	} else if jt, ok := timerOf(ts, JoinTimer, "a"); !ok || !jt.IfAbsent {
		t.Fatalf("sync of a told to rejoin: join timer %+v (%v)", jt, ok)
	}

	// The join timer fires: a is fenced, with all its timers cancelled.
	res = mgr.Expire(now.Add(30*time.Second), img, Timer{Kind: JoinTimer, Group: "g", Member: "a"})
	if mgr.Group("g").Members["a"] != nil || len(res.Records) == 0 {
		t.Fatal("the join timer did not fence a")
	}
	for _, kind := range []TimerKind{SessionTimer, RebalanceTimer, JoinTimer, SyncTimer} {
		if tm, ok := timerOf(res.Timers, kind, "a"); !ok || !tm.Cancel {
			t.Fatalf("fenced a: timer %d not cancelled: %+v", kind, res.Timers)
		}
	}
	// So does the sync timer, for b.
	if mgr.Expire(now.Add(20*time.Second), img, Timer{Kind: SyncTimer, Group: "g", Member: "b"}); mgr.Group("g").Members["b"] != nil {
		t.Fatal("the sync timer did not fence b")
	}
}

// TestDowngradeByStaticReplacement: a static classic member joining with
// the instance id of the group's last consumer-protocol member (which
// left for a while, epoch -2) downgrades the group, as Kafka's
// validateOnlineDowngradeWithReplacedMemberId: the classic group keeps
// the other members and gives the newcomer the old member's target, with
// no rebalance. Without a downgrade policy the newcomer just joins.
func TestDowngradeByStaticReplacement(t *testing.T) {
	for _, policy := range []MigrationPolicy{MigrationBidirectional, MigrationUpgrade} {
		mgr, img, now, _ := upgraded(t, policy)
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch, hb.InstanceID = 1, "g", "s", 0, kmsg.StringPtr("inst")
		hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = 30000, []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if resp, _ := mgr.Heartbeat(now, img, Client{ID: "s"}, hb); resp.ErrorCode != 0 {
			t.Fatalf("848 static join: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		target := mgr.Group("g").Target["s"]
		hb.MemberEpoch = StaticLeaveEpoch
		if resp, _ := mgr.Heartbeat(now, img, Client{ID: "s"}, hb); resp.ErrorCode != 0 {
			t.Fatalf("static leave: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		resp, res := mgr.ClassicJoin(now, img, Client{ID: "new"}, classicJoinReq("", kmsg.StringPtr("inst")))
		if resp.ErrorCode != 0 {
			t.Fatalf("%d: classic static join: %v", policy, kerr.ErrorForCode(resp.ErrorCode))
		}
		d := res.Downgrade
		if !policy.DowngradeEnabled() {
			if d != nil || mgr.Group("g") == nil || len(mgr.Group("g").Members) != 3 {
				t.Fatalf("downgraded without a downgrade policy: %+v", d)
			}
			continue
		}
		if d == nil || !d.Joined || mgr.Group("g") != nil || len(d.Members) != 3 {
			t.Fatalf("classic static join replacing the last 848 member: downgrade %+v, group %v", d, mgr.Group("g"))
		}
		for _, m := range d.Members {
			if m.InstanceID != nil && *m.InstanceID == "inst" {
				if m.ID != resp.MemberID || len(decodeAssignment(t, m.Assignment)) != target.Count() {
					t.Fatalf("the newcomer %+v: want id %s with the old member's %d partitions", m, resp.MemberID, target.Count())
				}
			}
		}
		if _, ok := timerOf(res.Timers, SyncTimer, resp.MemberID); ok {
			if st, _ := timerOf(res.Timers, SyncTimer, resp.MemberID); !st.Cancel {
				t.Fatal("a sync timer armed in a group that is no longer a consumer group")
			}
		}
	}
}
