package consumer

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzHeartbeat sends arbitrary heartbeats (any member id, epoch,
// subscription, regex, assignor, owned partitions, version) to a group
// with members: the coordinator must not panic, an error must change
// nothing, no partition may be listed under two members, and the records
// must replay to the same state.
func FuzzHeartbeat(f *testing.F) {
	f.Add(uint8(0), int32(0), uint8(0), "", "", uint16(0), false)
	f.Add(uint8(1), int32(2), uint8(1), "a.*", "range", uint16(3), true)
	f.Add(uint8(2), int32(-2), uint8(7), "(", "sticky", uint16(0xffff), true)
	f.Add(uint8(3), int32(-1), uint8(2), "", "uniform", uint16(1), false)
	f.Fuzz(func(t *testing.T, member uint8, epoch int32, flags uint8, regex, assignor string, owned uint16, v1 bool) {
		img := &Image{Version: 1, Topics: map[string]TopicImage{
			"a": {ID: topicID("a"), Partitions: 4},
			"b": {ID: topicID("b"), Partitions: 4},
		}}
		mgr := NewManager(Config{MaxSize: 4})
		var log []Record
		now := time.Unix(0, 0)
		send := func(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
			before := NewManager(Config{})
			for _, r := range log {
				_ = before.Replay(r)
			}
			resp, res := mgr.Heartbeat(now, img, Client{ID: "c"}, req)
			if resp.ErrorCode != 0 {
				if len(res.Records) != 0 {
					t.Fatalf("error %d with records", resp.ErrorCode)
				}
				if d := compareManagers(before, mgr); d != "" {
					t.Fatalf("error %d changed the state: %s", resp.ErrorCode, d)
				}
			}
			log = append(log, res.Records...)
			return resp
		}
		// Three members, one static.
		for i := range 3 {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version, req.Group, req.MemberID = 1, "g", fmt.Sprintf("m%d", i)
			req.RebalanceTimeoutMillis = 1000
			req.SubscribedTopicNames = []string{"a", "b"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			if i == 2 {
				inst := "i2"
				req.InstanceID = &inst
			}
			if resp := send(req); resp.ErrorCode != 0 {
				t.Fatalf("setup join: %d", resp.ErrorCode)
			}
		}

		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 0
		if v1 {
			req.Version = 1
		}
		req.Group = "g"
		req.MemberID = []string{"m0", "m1", "m2", "new", ""}[int(member)%5]
		req.MemberEpoch = epoch % 8
		req.RebalanceTimeoutMillis = -1
		if flags&1 != 0 {
			req.RebalanceTimeoutMillis = 500
		}
		if flags&2 != 0 {
			inst := []string{"i2", "i9", ""}[int(member)%3]
			req.InstanceID = &inst
		}
		if flags&4 != 0 {
			req.SubscribedTopicNames = []string{"b"}
		}
		if flags&8 != 0 && v1 {
			req.SubscribedTopicRegex = &regex
		}
		if flags&16 != 0 {
			req.ServerAssignor = &assignor
		}
		if flags&32 != 0 {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			for i := range 8 {
				if owned&(1<<i) != 0 {
					tid := topicID([]string{"a", "b"}[i/4])
					req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tid, Partitions: []int32{int32(i % 4)}})
				}
			}
		}
		send(req)
		if flags&64 != 0 {
			log = append(log, mgr.Expire(now, img, Timer{Kind: SessionTimer, Group: "g", Member: req.MemberID}).Records...)
			log = append(log, mgr.Expire(now, img, Timer{Kind: RebalanceTimer, Group: "g", Member: "m0", Epoch: 1}).Records...)
		}
		if g := mgr.Group("g"); g != nil {
			owner := map[TP]string{}
			for id, m := range g.Members {
				for _, tp := range m.Assigned.union(m.PendingRevocation).TPs() {
					if o, dup := owner[tp]; dup {
						t.Fatalf("%v owned by %s and %s", tp, o, id)
					}
					owner[tp] = id
				}
			}
		}
		fresh := NewManager(Config{})
		for _, r := range log {
			k, v := r.Encode()
			if err := fresh.ReplayEncoded(k, v); err != nil {
				t.Fatal(err)
			}
		}
		if d := compareManagers(mgr, fresh); d != "" {
			t.Fatalf("replay: %s", d)
		}
	})
}
