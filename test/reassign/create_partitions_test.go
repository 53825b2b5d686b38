package reassign

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// createPartitionsAssigned grows a topic with CreatePartitions and an
// explicit assignment (kadm has no call for one: the raw request goes
// through the admin client's kgo client): every node's Metadata gives the
// new partitions exactly the replicas asked for, in that order, led by the
// first, and they take acks=all writes; an unknown broker and a topic
// named twice are refused as from Kafka, changing nothing.
func createPartitionsAssigned(t *testing.T, c *testcluster.Cluster) {
	const topic = "grown"
	c.CreateTopic(topic, 1, -1, nil, [][]int32{{1, 2, 3}})
	cl := c.Client()
	ctx := ctxFor(t, 40*time.Second)
	send := func(topics ...kmsg.CreatePartitionsRequestTopic) []kmsg.CreatePartitionsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 30000
		req.Topics = topics
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("CreatePartitions: %v", err)
		}
		return resp.Topics
	}
	grow := func(count int32, assignment ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		for _, reps := range assignment {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = reps
			rt.Assignment = append(rt.Assignment, a)
		}
		return rt
	}
	res := send(grow(3, []int32{1, 2, 9}, []int32{1, 2, 3}))
	if len(res) != 1 || res[0].ErrorCode != kerr.InvalidReplicaAssignment.Code || res[0].ErrorMessage == nil ||
		!strings.Contains(*res[0].ErrorMessage, "includes broker 9, but no such broker is registered") {
		t.Fatalf("unknown broker: %+v", res)
	}
	res = send(grow(3, []int32{3, 2, 1}, []int32{2, 1, 3}), grow(3, []int32{3, 2, 1}, []int32{2, 1, 3}))
	if len(res) != 1 || res[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("topic named twice: %+v", res)
	}
	if m, err := c.Meta(topic); err != nil || len(m) != 1 {
		t.Fatalf("after the refusals: %v %v", m, err)
	}

	want := [][]int32{{3, 2, 1}, {2, 1, 3}}
	if res = send(grow(3, want...)); len(res) != 1 || res[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions: %+v", res)
	}
	testcluster.WaitFor(t, 20*time.Second, "every node lists the assigned replicas", func() (bool, string) {
		all, err := c.MetaAll(topic)
		if err != nil {
			return false, err.Error()
		}
		for id, m := range all {
			for i, reps := range want {
				p, ok := m[int32(i+1)]
				if !ok || !slices.Equal(p.Replicas, reps) || p.Leader != reps[0] || len(p.ISR) != 3 {
					return false, fmt.Sprintf("node %d partition %d: %v, want replicas %v led by %d", id, i+1, p, reps, reps[0])
				}
			}
		}
		return true, ""
	})
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(1); p <= 2; p++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
}
