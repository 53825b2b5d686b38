package consumer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicSub is a consumer-protocol subscription (v1, with owned
// partitions of topic "t").
func classicSub(owned ...int32) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 1
	m.Topics = []string{"t"}
	if len(owned) > 0 {
		m.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: owned}}
	}
	return m.AppendTo(nil)
}

func classicAssignment(ps ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 1
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: ps}}
	return a.AppendTo(nil)
}

func decodeAssignment(t *testing.T, b []byte) []int32 {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	var out []int32
	for _, tp := range a.Topics {
		out = append(out, tp.Partitions...)
	}
	return out
}

// upgraded is a manager holding group "g" upgraded from a classic group
// at generation 5 whose members a and b own t:0,1 and t:2,3.
func upgraded(t *testing.T, policy MigrationPolicy) (*Manager, *Image, time.Time, []Record) {
	t.Helper()
	ids := 0
	mgr := NewManager(Config{Migration: policy, NewMemberID: func() string { ids++; return "gen" + string(rune('0'+ids)) }})
	img := &Image{Version: 1, Topics: map[string]TopicImage{"t": {ID: topicID("t"), Partitions: 4}}}
	now := time.Unix(1_700_000_000, 0)
	if !mgr.CanUpgrade(ConsumerProtocolType, 2) {
		t.Fatalf("policy %d refuses the upgrade", policy)
	}
	member := func(id string, ps ...int32) ClassicMember {
		return ClassicMember{ID: id, ClientID: id, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000,
			Protocols:    []ClassicProtocol{{Name: "cooperative-sticky", Metadata: classicSub(ps...)}},
			Subscription: classicSub(ps...), Assignment: classicAssignment(ps...)}
	}
	res, e := mgr.Upgrade(now, img, "g", 5, []ClassicMember{member("a", 0, 1), member("b", 2, 3)})
	if e != nil {
		t.Fatal(e)
	}
	g := mgr.Group("g")
	if g.Epoch != 5 || g.AssignmentEpoch != 5 || len(g.Members) != 2 {
		t.Fatalf("upgraded group: epoch %d assignment epoch %d members %d", g.Epoch, g.AssignmentEpoch, len(g.Members))
	}
	for _, m := range g.Members {
		if !m.UsesClassic() || m.Epoch != 5 || m.State != MemberStable || m.Assigned.Count() != 2 || m.Classic.SessionTimeoutMs != 10000 {
			t.Fatalf("upgraded member %+v", m)
		}
	}
	if len(res.Timers) != 2 || res.Timers[0].At != now.Add(10*time.Second) {
		t.Fatalf("upgrade timers %+v: want each member's classic session", res.Timers)
	}
	return mgr, img, now, res.Records
}

// TestUpgradeClassicMembers converts a running classic group and drives
// its classic members through a KIP-848 member's arrival: they are told
// to rejoin, revoke before the newcomer gets their partitions, and their
// generation is their member epoch.
func TestUpgradeClassicMembers(t *testing.T) {
	mgr, img, now, log := upgraded(t, MigrationBidirectional)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "g", "c", 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = 30000, []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, res := mgr.Heartbeat(now, img, Client{ID: "c"}, hb)
	if resp.ErrorCode != 0 || resp.MemberEpoch != 6 {
		t.Fatalf("848 join: %v epoch %d", kerr.ErrorForCode(resp.ErrorCode), resp.MemberEpoch)
	}
	log = append(log, res.Records...)
	g := mgr.Group("g")
	if c := g.Members["c"]; c.Assigned.Count() != 0 || g.Target["c"].Count() == 0 {
		t.Fatalf("newcomer holds %v (target %v) while the classic members still own every partition", c.Assigned, g.Target["c"])
	}

	// The classic members are told to rejoin, and cannot sync the old
	// generation.
	beat := func(id string, gen int32) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = "g", id, gen
		code, _ := mgr.ClassicHeartbeat(now, req)
		return code
	}
	if code := beat("a", 5); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat of a at 5: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	if code := beat("a", 4); code != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat of a at 4: %v, want ILLEGAL_GENERATION", kerr.ErrorForCode(code))
	}
	if code := beat("c", 6); code != kerr.UnknownMemberID.Code {
		t.Fatalf("classic heartbeat of the 848 member: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
	sync := func(id string, gen int32) *kmsg.SyncGroupResponse {
		req := kmsg.NewPtrSyncGroupRequest()
		pt, p := "consumer", "cooperative-sticky"
		req.Group, req.MemberID, req.Generation, req.ProtocolType, req.Protocol = "g", id, gen, &pt, &p
		resp, _ := mgr.ClassicSync(now, img, req)
		return resp
	}
	if r := sync("a", 5); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync of a at 5: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(r.ErrorCode))
	}
	if code, _ := mgr.ValidateOffsetCommit("g", "a", 4); code != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of classic a at a stale generation: %v, want ILLEGAL_GENERATION", kerr.ErrorForCode(code))
	}

	// Each classic member rejoins owning its partitions; one that must
	// give some up stays at its epoch until it rejoins without them.
	join := func(id string, owned ...int32) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID, req.ProtocolType = 7, "g", id, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 30000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: classicSub(owned...)}}
		resp, res := mgr.ClassicJoin(now, img, Client{ID: id}, req)
		log = append(log, res.Records...)
		if resp.ErrorCode != 0 {
			t.Fatalf("join of %s: %v", id, kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp.LeaderID != "" || len(resp.Members) != 0 || *resp.Protocol != "cooperative-sticky" {
			t.Fatalf("join of %s: leader %q members %d protocol %q: the coordinator assigns", id, resp.LeaderID, len(resp.Members), *resp.Protocol)
		}
		return resp
	}
	for _, id := range []string{"a", "b"} {
		m := g.Members[id]
		owned := m.Assigned.TPs()
		var ps []int32
		for _, tp := range owned {
			ps = append(ps, tp.Partition)
		}
		resp := join(id, ps...)
		m = mgr.Group("g").Members[id]
		if m.State == MemberUnrevokedPartitions {
			if resp.Generation != 5 || beat(id, 5) != kerr.RebalanceInProgress.Code {
				t.Fatalf("%s revoking: generation %d", id, resp.Generation)
			}
			kept := decodeAssignment(t, sync(id, 5).MemberAssignment)
			if len(kept) != m.Assigned.Count() {
				t.Fatalf("%s sync: %v, want its kept partitions %v", id, kept, m.Assigned)
			}
			resp = join(id, kept...)
		}
		if resp.Generation != 6 {
			t.Fatalf("%s after revoking: generation %d, want 6", id, resp.Generation)
		}
		if r := sync(id, 6); r.ErrorCode != 0 {
			t.Fatalf("sync of %s at 6: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// The newcomer now gets its target.
	hb.MemberEpoch, hb.Topics = 6, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, res = mgr.Heartbeat(now, img, Client{ID: "c"}, hb)
	log = append(log, res.Records...)
	if c := mgr.Group("g").Members["c"]; resp.ErrorCode != 0 || !c.Assigned.Equal(mgr.Group("g").Target["c"]) {
		t.Fatalf("newcomer after the revocations: %v, holds %v of %v", kerr.ErrorForCode(resp.ErrorCode), c.Assigned, mgr.Group("g").Target["c"])
	}

	// Replaying the records rebuilds the classic members' metadata.
	fresh := NewManager(Config{})
	for _, r := range log {
		k, v := r.Encode()
		if err := fresh.ReplayEncoded(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for id, m := range mgr.Group("g").Members {
		if !m.Classic.equal(fresh.Group("g").Members[id].Classic) {
			t.Fatalf("replayed classic metadata of %s: %+v, want %+v", id, fresh.Group("g").Members[id].Classic, m.Classic)
		}
	}

	// The last KIP-848 member leaving downgrades the group; the others
	// keep their targets (the classic group then rebalances).
	cTarget := mgr.Group("g").Target["c"].Count()
	hb.MemberEpoch = LeaveEpoch
	_, res = mgr.Heartbeat(now, img, Client{ID: "c"}, hb)
	d := res.Downgrade
	if d == nil || mgr.Group("g") != nil {
		t.Fatalf("leave of the last 848 member: downgrade %+v, group %v", d, mgr.Group("g"))
	}
	if d.Generation != 6 || len(d.Members) != 2 {
		t.Fatalf("downgrade %+v: want generation 6 with a and b", d)
	}
	total := 0
	for _, m := range d.Members {
		total += len(decodeAssignment(t, m.Assignment))
		if len(m.Protocols) != 1 || m.SessionTimeoutMs != 10000 {
			t.Fatalf("downgraded member %+v", m)
		}
	}
	if total != 4-cTarget {
		t.Fatalf("downgraded assignments cover %d partitions, want %d", total, 4-cTarget)
	}
}

// TestMigrationPolicy checks group.consumer.migration.policy: upgrade
// and downgrade only when allowed, a classic member leaving never
// downgrades, and only groups of the consumer protocol type convert.
func TestMigrationPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy             string
		upgrade, downgrade bool
	}{{"bidirectional", true, true}, {"UPGRADE", true, false}, {"downgrade", false, true}, {"disabled", false, false}} {
		p, ok := ParseMigrationPolicy(tc.policy)
		if !ok || p.UpgradeEnabled() != tc.upgrade || p.DowngradeEnabled() != tc.downgrade {
			t.Errorf("%s: upgrade %v downgrade %v", tc.policy, p.UpgradeEnabled(), p.DowngradeEnabled())
		}
		mgr := NewManager(Config{Migration: p, MaxSize: 3})
		if mgr.CanUpgrade(ConsumerProtocolType, 2) != tc.upgrade || mgr.CanUpgrade("connect", 2) || mgr.CanUpgrade(ConsumerProtocolType, 4) {
			t.Errorf("%s: CanUpgrade wrong", tc.policy)
		}
	}

	// Upgrade-only: the KIP-848 member leaving leaves a consumer group of
	// classic members.
	mgr, img, now, _ := upgraded(t, MigrationUpgrade)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID = 1, "g", "c"
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = 30000, []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	mgr.Heartbeat(now, img, Client{}, hb)
	hb.MemberEpoch = LeaveEpoch
	if _, res := mgr.Heartbeat(now, img, Client{}, hb); res.Downgrade != nil || len(mgr.Group("g").Members) != 2 {
		t.Fatalf("upgrade-only policy downgraded the group")
	}

	// A classic member leaving does not downgrade; nor does the last
	// classic member when a KIP-848 one remains.
	mgr, img, now, _ = upgraded(t, MigrationBidirectional)
	hb.MemberEpoch = 0
	mgr.Heartbeat(now, img, Client{}, hb)
	id, res, e := mgr.ClassicLeave(img, "g", "a", nil)
	if e != nil || id != "a" || res.Downgrade != nil || len(mgr.Group("g").Members) != 2 {
		t.Fatalf("classic leave: %v %v downgrade %v", id, e, res.Downgrade)
	}
	if _, _, e := mgr.ClassicLeave(img, "g", "c", nil); e == nil || e.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("classic leave of the 848 member: %v, want UNKNOWN_MEMBER_ID", e)
	}
	// group.max.size below the classic members left: no downgrade.
	mgr, img, now, _ = upgraded(t, MigrationBidirectional)
	mgr.cfg.ClassicMaxSize = 1
	hb.MemberEpoch = 0
	mgr.Heartbeat(now, img, Client{}, hb)
	hb.MemberEpoch = LeaveEpoch
	if _, res := mgr.Heartbeat(now, img, Client{}, hb); res.Downgrade != nil {
		t.Fatalf("downgraded a group larger than group.max.size")
	}
}
