package handler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKIP848OffsetDeleteSubscribedTopic deletes committed offsets of a
// KIP-848 consumer group while a franz-go member (server-side balancer)
// consumes: the offsets of a topic a member subscribes to, by name or
// through a regular expression the broker resolved, stay
// (GROUP_SUBSCRIBED_TO_TOPIC), those of another topic go (Kafka's
// OffsetMetadataManager.deleteOffsets with ConsumerGroup.isSubscribedToTopic;
// librdkafka's test 0081 DeleteConsumerGroupOffsets "with subscribing
// consumer").
func TestKIP848OffsetDeleteSubscribedTopic(t *testing.T) {
	n := startNode(t, "", kip848Props)
	admin := n.client()
	adm := kadm.NewClient(admin)
	for _, topic := range []string{"odel-a", "odel-b", "odel-c"} {
		createTopic(t, admin, topic, 2, nil)
	}
	for _, tc := range []struct {
		group      string
		subscribed string
		opts       []kgo.Opt
	}{
		{"odel-names", "odel-a", []kgo.Opt{kgo.ConsumeTopics("odel-a")}},
		{"odel-regex", "odel-c", []kgo.Opt{kgo.ConsumeRegex(), kgo.ConsumeTopics("odel-c")}},
	} {
		t.Run(tc.group, func(t *testing.T) {
			// Offsets committed while the group is empty (an admin commit,
			// generation -1), then a consumer joins with the protocol.
			offs := kadm.Offsets{}
			for _, topic := range []string{tc.subscribed, "odel-b"} {
				for p := int32(0); p < 2; p++ {
					offs.Add(kadm.Offset{Topic: topic, Partition: p, At: 5, LeaderEpoch: -1})
				}
			}
			if err := adm.CommitAllOffsets(ctx(t), tc.group, offs); err != nil {
				t.Fatal(err)
			}
			cl := n.client(append([]kgo.Opt{kgo.ConsumerGroup(tc.group), kgo.ServerSideBalancer(), kgo.DisableAutoCommit()}, tc.opts...)...)
			c := ctx(t)
			go func() {
				for {
					if f := cl.PollFetches(c); f.IsClientClosed() || c.Err() != nil {
						return
					}
				}
			}()
			deadline := time.Now().Add(15 * time.Second)
			for {
				req := kmsg.NewPtrConsumerGroupDescribeRequest()
				req.Groups = []string{tc.group}
				g := request[*kmsg.ConsumerGroupDescribeResponse](t, admin, req).Groups[0]
				if g.ErrorCode == 0 && len(g.Members) == 1 && len(g.Members[0].Assignment.TopicPartitions) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the consumer never got its assignment: %+v", g)
				}
				time.Sleep(100 * time.Millisecond)
			}

			del := kadm.TopicsSet{}
			del.Add(tc.subscribed, 0, 1)
			del.Add("odel-b", 0, 1)
			res, err := adm.DeleteOffsets(ctx(t), tc.group, del)
			if err != nil {
				t.Fatal(err)
			}
			for p := int32(0); p < 2; p++ {
				if err := res[tc.subscribed][p]; !errors.Is(err, kerr.GroupSubscribedToTopic) {
					t.Errorf("%s[%d]: %v, want GROUP_SUBSCRIBED_TO_TOPIC", tc.subscribed, p, err)
				}
				if err := res["odel-b"][p]; err != nil {
					t.Errorf("odel-b[%d]: %v, want deleted", p, err)
				}
			}
			fetched, err := adm.FetchOffsets(ctx(t), tc.group)
			if err != nil {
				t.Fatal(err)
			}
			for p := int32(0); p < 2; p++ {
				if o, ok := fetched.Lookup(tc.subscribed, p); !ok || o.At != 5 {
					t.Errorf("%s[%d] committed %+v after the delete, want 5 kept", tc.subscribed, p, o)
				}
				if o, ok := fetched.Lookup("odel-b", p); ok && o.At >= 0 {
					t.Errorf("odel-b[%d] committed %+v after the delete, want none", p, o)
				}
			}
		})
	}
}
