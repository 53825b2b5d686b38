package handler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeTopicPartitionsPages: DescribeTopicPartitions (API 75) over
// TCP pages through the topics in name order with a cursor and
// ResponsePartitionLimit, as Kafka's DescribeTopicPartitionsRequestHandler.
func TestDescribeTopicPartitionsPages(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	adm := kadm.NewClient(cl)
	for name, parts := range map[string]int32{"dtp-a": 3, "dtp-b": 2, "dtp-c": 1} {
		if _, err := adm.CreateTopic(ctx(t), parts, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	// page renders one answer as "topic-partition ..." and its cursor.
	page := func(topics []string, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor) (string, *kmsg.DescribeTopicPartitionsResponseNextCursor) {
		t.Helper()
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		for _, name := range topics {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = name
			req.Topics = append(req.Topics, rt)
		}
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		resp := request[*kmsg.DescribeTopicPartitionsResponse](t, cl, req)
		var out []string
		for _, rt := range resp.Topics {
			if rt.ErrorCode != 0 {
				out = append(out, fmt.Sprintf("%s:%s", *rt.Topic, kerr.ErrorForCode(rt.ErrorCode).(*kerr.Error).Message))
				continue
			}
			for _, p := range rt.Partitions {
				if p.LeaderID != 1 || len(p.ISR) != 1 || p.EligibleLeaderReplicas == nil || p.LastKnownELR == nil {
					t.Fatalf("%s-%d: %+v", *rt.Topic, p.Partition, p)
				}
				out = append(out, fmt.Sprintf("%s-%d", *rt.Topic, p.Partition))
			}
		}
		return strings.Join(out, " "), resp.NextCursor
	}
	all := []string{"dtp-c", "dtp-a", "dtp-b"}
	got, next := page(all, 2, nil)
	if got != "dtp-a-0 dtp-a-1" || next == nil || next.Topic != "dtp-a" || next.Partition != 2 {
		t.Fatalf("page 1: %q, cursor %+v", got, next)
	}
	got, next = page(all, 2, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: next.Topic, Partition: next.Partition})
	if got != "dtp-a-2 dtp-b-0" || next == nil || next.Topic != "dtp-b" || next.Partition != 1 {
		t.Fatalf("page 2: %q, cursor %+v", got, next)
	}
	got, next = page(all, 2, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: next.Topic, Partition: next.Partition})
	if got != "dtp-b-1 dtp-c-0" || next != nil {
		t.Fatalf("page 3: %q, cursor %+v", got, next)
	}
	// A topic that ends the limit exactly: the cursor names the next topic.
	if got, next = page(all, 3, nil); got != "dtp-a-0 dtp-a-1 dtp-a-2" || next == nil || next.Topic != "dtp-b" || next.Partition != 0 {
		t.Fatalf("limit 3: %q, cursor %+v", got, next)
	}
	// No topics named: every topic; an unknown one named is an error.
	if got, next = page(nil, 0, nil); got != "dtp-a-0 dtp-a-1 dtp-a-2 dtp-b-0 dtp-b-1 dtp-c-0" || next != nil {
		t.Fatalf("every topic: %q, cursor %+v", got, next)
	}
	if got, _ = page([]string{"dtp-b", "nope"}, 10, nil); got != "dtp-b-0 dtp-b-1 nope:"+kerr.UnknownTopicOrPartition.Message {
		t.Fatalf("unknown topic: %q", got)
	}
	// A cursor on a topic not asked for is an invalid request.
	if got, _ = page([]string{"dtp-b"}, 10, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-a"}); got != "dtp-b:"+kerr.InvalidRequest.Message {
		t.Fatalf("foreign cursor: %q", got)
	}
}
