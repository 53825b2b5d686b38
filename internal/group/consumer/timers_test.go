package consumer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLoadedTimers: after loading, every member gets a session timeout
// and a member with partitions to revoke a rebalance timeout at its
// epoch; timer keys do not collide across group/member splits.
func TestLoadedTimers(t *testing.T) {
	img := &Image{Version: 1, Topics: map[string]TopicImage{"a": {ID: topicID("a"), Partitions: 2}}}
	mgr := NewManager(Config{SessionTimeout: 10 * time.Second})
	now := time.Unix(100, 0)
	var log []Record
	hb := func(member string, epoch int32, owned []int32) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", member, epoch
		req.RebalanceTimeoutMillis = -1
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 3000
			req.SubscribedTopicNames = []string{"a"}
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if owned != nil {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicID("a"), Partitions: owned})
		}
		resp, res := mgr.Heartbeat(now, img, Client{}, req)
		if resp.ErrorCode != 0 {
			t.Fatalf("%s: %d", member, resp.ErrorCode)
		}
		log = append(log, res.Records...)
	}
	hb("m1", 0, nil)
	hb("m2", 0, nil)
	hb("m1", 1, []int32{0, 1}) // m1 must revoke one partition
	loaded := NewManager(Config{SessionTimeout: 10 * time.Second})
	for _, r := range log {
		k, v := r.Encode()
		if err := loaded.ReplayEncoded(k, v); err != nil {
			t.Fatal(err)
		}
	}
	later := now.Add(time.Minute)
	got := loaded.LoadedTimers(later)
	if len(got) != 3 {
		t.Fatalf("timers %+v", got)
	}
	var rebalance int
	for _, tm := range got {
		switch tm.Kind {
		case SessionTimer:
			if !tm.At.Equal(later.Add(10 * time.Second)) {
				t.Fatalf("session timer %+v", tm)
			}
		case RebalanceTimer:
			rebalance++
			if tm.Member != "m1" || tm.Epoch != 1 || !tm.At.Equal(later.Add(3*time.Second)) {
				t.Fatalf("rebalance timer %+v", tm)
			}
			// It fences m1 when it fires.
			if res := loaded.Expire(tm.At, img, tm); len(res.Records) == 0 || loaded.Group("g").Members["m1"] != nil {
				t.Fatalf("rebalance expiry did not fence m1: %+v", res)
			}
		}
	}
	if rebalance != 1 {
		t.Fatalf("%d rebalance timers", rebalance)
	}
	a := Timer{Kind: SessionTimer, Group: "g-a", Member: "b"}
	b := Timer{Kind: SessionTimer, Group: "g", Member: "a-b"}
	if a.Key() == b.Key() || a.Key() == (Timer{Kind: RebalanceTimer, Group: "g-a", Member: "b"}).Key() {
		t.Fatal("timer keys collide")
	}
}

// TestCloneIsolated: a clone taken before a heartbeat keeps the old
// state however the original changes, so a caller can roll back.
func TestCloneIsolated(t *testing.T) {
	img := &Image{Version: 1, Topics: map[string]TopicImage{"a": {ID: topicID("a"), Partitions: 4}}}
	mgr := NewManager(Config{})
	var log []Record
	join := func(m *Manager, member string) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID = 1, "g", member
		req.RebalanceTimeoutMillis = 1000
		req.SubscribedTopicNames = []string{"a"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if resp, res := m.Heartbeat(time.Unix(0, 0), img, Client{}, req); resp.ErrorCode != 0 {
			t.Fatal(resp.ErrorCode)
		} else if m == mgr {
			log = append(log, res.Records...)
		}
	}
	join(mgr, "m1")
	join(mgr, "m2")
	saved, upTo := mgr.Clone(), len(log)
	join(mgr, "m3")
	mgr.Expire(time.Unix(0, 0), img, Timer{Kind: SessionTimer, Group: "g", Member: "m1"})
	want := NewManager(Config{})
	for _, r := range log[:upTo] {
		_ = want.Replay(r)
	}
	if d := compareManagers(saved, want); d != "" {
		t.Fatalf("the clone changed with the original: %s", d)
	}
	// And the clone works on its own.
	join(saved, "m4")
	if saved.Group("g").Members["m4"] == nil || mgr.Group("g").Members["m4"] != nil {
		t.Fatal("clone and original share members")
	}
}
