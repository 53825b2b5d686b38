package consumer

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestManyMembers joins 2,000 members (500 with -short) and checks the group stays valid: every partition in exactly one target,
// no partition owned twice, and a steady heartbeat writes nothing.
func TestManyMembers(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 500
	}
	img := &Image{Version: 1, Topics: map[string]TopicImage{"a": {ID: topicID("a"), Partitions: 64}}}
	mgr := NewManager(Config{})
	now := time.Unix(0, 0)
	start := time.Now()
	for i := range n {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = "g"
		req.MemberID = fmt.Sprintf("m%05d", i)
		req.RebalanceTimeoutMillis = 1000
		req.SubscribedTopicNames = []string{"a"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if resp, _ := mgr.Heartbeat(now, img, Client{}, req); resp.ErrorCode != 0 {
			t.Fatalf("join %d: error %d", i, resp.ErrorCode)
		}
	}
	t.Logf("%d joins in %v", n, time.Since(start))
	g := mgr.Group("g")
	seen := map[TP]bool{}
	for _, a := range g.Target {
		for _, tp := range a.TPs() {
			if seen[tp] {
				t.Fatalf("%v in two targets", tp)
			}
			seen[tp] = true
		}
	}
	if len(seen) != 64 {
		t.Fatalf("%d partitions in the target, want 64", len(seen))
	}
	// A member with nothing to do heartbeats: no records.
	m := g.Members[fmt.Sprintf("m%05d", n-1)]
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", m.ID, m.Epoch, -1
	start = time.Now()
	resp, res := mgr.Heartbeat(now, img, Client{}, req)
	if resp.ErrorCode != 0 || len(res.Records) != 0 {
		t.Fatalf("steady heartbeat: error %d, %d records", resp.ErrorCode, len(res.Records))
	}
	t.Logf("steady heartbeat in a %d-member group: %v", n, time.Since(start))
}
