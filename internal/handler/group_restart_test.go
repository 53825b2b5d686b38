package handler_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupOffsetsSurviveRestart commits offsets with a consumer group and
// with simple (generation -1) commits, restarts the broker on the same data
// directory, and reads them back, along with the group's metadata.
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	n := startNode(t, "", groupProps)
	const topic, total = "durable", 300
	createTopic(t, n.client(), topic, 3, nil)
	produceN(t, n, topic, 0, total)

	// A group consumer reads everything and commits on close.
	cl := n.client(kgo.ConsumerGroup("restart-group"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.DisableAutoCommit())
	got := 0
	for got < total {
		fs := cl.PollFetches(ctx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
		if err := cl.CommitUncommittedOffsets(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()

	adm := kadm.NewClient(n.client())
	simple := kadm.Offsets{}
	simple.Add(kadm.Offset{Topic: topic, Partition: 1, At: 42, LeaderEpoch: -1, Metadata: "kept"})
	if resp, err := adm.CommitOffsets(ctx(t), "simple-group", simple); err != nil || resp.Error() != nil {
		t.Fatalf("simple commit: %v %v", err, resp.Error())
	}
	before, err := adm.FetchOffsets(ctx(t), "restart-group")
	if err != nil {
		t.Fatal(err)
	}
	checkCommittedAtEnd(t, n, "restart-group", topic)

	n.stop()
	n2 := startNode(t, n.dir, groupProps)
	adm = kadm.NewClient(n2.client())
	after, err := adm.FetchOffsets(ctx(t), "restart-group")
	if err != nil {
		t.Fatal(err)
	}
	before.Each(func(o kadm.OffsetResponse) {
		a, ok := after.Lookup(o.Topic, o.Partition)
		if !ok || a.At != o.At || a.Err != nil {
			t.Errorf("%s/%d: before restart %d, after %d (found %v, err %v)", o.Topic, o.Partition, o.At, a.At, ok, a.Err)
		}
	})
	if len(after.Offsets()[topic]) != 3 {
		t.Errorf("after restart: %v", after)
	}
	s, err := adm.FetchOffsets(ctx(t), "simple-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := s.Lookup(topic, 1); !ok || o.At != 42 || o.Metadata != "kept" {
		t.Errorf("simple commit after restart: %+v (found %v)", o, ok)
	}
	gs, err := adm.DescribeGroups(ctx(t), "restart-group")
	if err != nil {
		t.Fatal(err)
	}
	if g := gs["restart-group"]; g.State != "Empty" || g.ProtocolType != "consumer" {
		t.Errorf("group after restart: state %q protocol type %q", g.State, g.ProtocolType)
	}
	listed, err := adm.ListGroups(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["restart-group"]; !ok {
		t.Errorf("ListGroups after restart: %v", listed.Groups())
	}
	checkCommittedAtEnd(t, n2, "restart-group", topic)
}
