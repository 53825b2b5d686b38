package handler_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicCountersAndGroupSummaries checks what the console reads from a
// node: produce counts every appended record once, consumer fetches count
// what they returned, and the coordinator lists the group with its commits.
func TestTopicCountersAndGroupSummaries(t *testing.T) {
	n := startNode(t, "", map[string]string{"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"})
	cl := n.client(kgo.DefaultProduceTopic("ctr"), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
	createTopic(t, cl, "ctr", 1, nil)
	const N = 40
	var bytes int64
	for i := range N {
		r := &kgo.Record{Value: []byte{byte(i), 'x', 'y'}}
		if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := n.b.TopicCounters()["ctr"]
	if c.RecordsIn != N || c.BytesIn <= 3*N || c.RecordsOut != 0 {
		t.Fatalf("after produce: %+v", c)
	}
	bytes = c.BytesIn
	gcl := n.client(kgo.ConsumerGroup("cg"), kgo.ConsumeTopics("ctr"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < N {
		fs := gcl.PollFetches(ctx(t))
		if err := ctx(t).Err(); err != nil {
			t.Fatal(err)
		}
		got += len(fs.Records())
	}
	if err := gcl.CommitUncommittedOffsets(ctx(t)); err != nil {
		t.Fatal(err)
	}
	c = n.b.TopicCounters()["ctr"]
	// Batches may be fetched more than once (a consumer re-fetching after
	// a rebalance), never less than once.
	if c.RecordsOut < N || c.BytesOut < bytes || c.RecordsIn != N {
		t.Fatalf("after consume: %+v (produced %d bytes)", c, bytes)
	}
	gs := n.h.Groups().Summaries()
	if len(gs) != 1 || gs[0].ID != "cg" || gs[0].State != "Stable" || len(gs[0].Members) != 1 ||
		len(gs[0].Members[0].Assigned) != 1 || len(gs[0].Offsets) != 1 || gs[0].Offsets[0].Offset != N {
		t.Fatalf("group summaries %+v", gs)
	}
}
