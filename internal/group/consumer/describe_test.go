package consumer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAnswersEncode runs a join and a describe and checks both answers
// survive kmsg's encoding at every version (nullable and required fields
// set as the schema wants).
func TestAnswersEncode(t *testing.T) {
	img := &Image{Version: 1, Topics: map[string]TopicImage{"a": {ID: topicID("a"), Partitions: 3}}}
	mgr := NewManager(Config{})
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = v
		req.Group = "g"
		req.MemberID = "m" + string(rune('0'+v))
		req.RebalanceTimeoutMillis = 1000
		req.SubscribedTopicNames = []string{"a"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, _ := mgr.Heartbeat(time.Unix(0, 0), img, Client{ID: "c", Host: "/h"}, req)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		var back kmsg.ConsumerGroupHeartbeatResponse
		back.Version = v
		if err := back.ReadFrom(resp.AppendTo(nil)); err != nil || *back.MemberID != req.MemberID {
			t.Fatalf("v%d heartbeat answer: %v", v, err)
		}
	}
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Version = v
		req.Groups = []string{"g", "missing"}
		resp := mgr.Describe(img, req)
		var back kmsg.ConsumerGroupDescribeResponse
		back.Version = v
		if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("v%d describe answer: %v", v, err)
		}
		if len(back.Groups) != 2 || len(back.Groups[0].Members) != 2 || back.Groups[1].ErrorCode == 0 {
			t.Fatalf("v%d describe answer: %+v", v, back)
		}
		var assigned int
		for _, m := range back.Groups[0].Members {
			for _, tp := range m.TargetAssignment.TopicPartitions {
				if tp.Topic != "a" {
					t.Fatalf("topic name %q", tp.Topic)
				}
				assigned += len(tp.Partitions)
			}
		}
		if assigned != 3 {
			t.Fatalf("v%d: %d partitions in the target assignment, want 3", v, assigned)
		}
	}
}
