package share

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestShareLeaderFailover: records accepted or rejected on a partition's
// leader are never delivered again after the leader is SIGKILLed (their
// state is durable in __share_group_state before the acknowledgement is
// answered), and the records that were acquired but not acknowledged are
// delivered by the new leader with the same delivery count again: an
// acquisition is not persisted (Kafka's SharePartition.acquire writes
// nothing, and its writes carry only the records leaving Acquired).
func TestShareLeaderFailover(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, StartTimeout: 30 * time.Second,
		Props: map[string]string{"default.replication.factor": "3", "offsets.topic.replication.factor": "3",
			"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}})
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestRetries(0))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(tctx(t, 30*time.Second), 1, 3, nil, "q"); err != nil {
		t.Fatal(err)
	}
	const total = 100
	var meta map[int32]testcluster.PartitionMeta
	testcluster.WaitFor(t, 30*time.Second, "a full ISR", func() (bool, string) {
		var err error
		meta, err = c.Meta("q")
		if err != nil || len(meta) != 1 || meta[0].Leader < 0 || len(meta[0].ISR) != 3 {
			return false, fmt.Sprint(meta, err)
		}
		return true, ""
	})
	for i := 0; i < total; i++ {
		if err := cl.ProduceSync(tctx(t, 30*time.Second), &kgo.Record{Topic: "q", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	td, _ := adm.ListTopics(tctx(t, 10*time.Second), "q")
	topicID := td["q"].ID
	set := "earliest"
	ireq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "share.auto.offset.reset", &set
	rr.Configs = append(rr.Configs, cfg)
	ireq.Resources = append(ireq.Resources, rr)
	if _, err := ireq.RequestWith(tctx(t, 10*time.Second), cl); err != nil {
		t.Fatal(err)
	}
	waitGroupConfig(t, c, cl, "sg", "share.auto.offset.reset", "earliest")
	leader := meta[0].Leader
	a := memberID()
	r := shareFetch(t, cl, leader, "sg", a, topicID, 0)
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch: %+v", r)
	}
	got := 0
	for _, ar := range r.Topics[0].Partitions[0].AcquiredRecords {
		got += int(ar.LastOffset - ar.FirstOffset + 1)
	}
	if got != total {
		t.Fatalf("acquired %d of %d", got, total)
	}
	// Accept 0-49, reject 50-59.
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	g := "sg"
	ack.Version, ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = 1, &g, &a, 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = topicID
	at.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0, AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: 0, LastOffset: 49, AcknowledgeTypes: []int8{1}}, {FirstOffset: 50, LastOffset: 59, AcknowledgeTypes: []int8{3}}}}}
	ack.Topics = append(ack.Topics, at)
	resp, err := cl.Broker(int(leader)).Request(tctx(t, 15*time.Second), ack)
	if err != nil {
		t.Fatal(err)
	}
	if ar := resp.(*kmsg.ShareAcknowledgeResponse); ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ack: %v %v", kerr.ErrorForCode(ar.ErrorCode), kerr.ErrorForCode(ar.Topics[0].Partitions[0].ErrorCode))
	}
	c.Node(leader).Kill()
	var newLeader int32
	testcluster.WaitFor(t, 30*time.Second, "a new leader", func() (bool, string) {
		m, err := c.Meta("q")
		if err != nil || m[0].Leader < 0 || m[0].Leader == leader {
			return false, fmt.Sprint(m, err)
		}
		newLeader = m[0].Leader
		return true, ""
	})
	seen := map[int64]int16{}
	b := memberID()
	testcluster.WaitFor(t, 30*time.Second, "offsets 60-99 from the new leader", func() (bool, string) {
		r := shareFetch(t, cl, newLeader, "sg", b, topicID, 0)
		if r.ErrorCode != 0 || len(r.Topics) == 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			return false, fmt.Sprintf("%+v", r)
		}
		for _, ar := range r.Topics[0].Partitions[0].AcquiredRecords {
			for o := ar.FirstOffset; o <= ar.LastOffset; o++ {
				if o < 60 {
					t.Fatalf("offset %d, acknowledged before the failover, delivered again (count %d)", o, ar.DeliveryCount)
				}
				seen[o] = ar.DeliveryCount
			}
		}
		return len(seen) == 40, fmt.Sprintf("%d seen", len(seen))
	})
	for o, n := range seen {
		if n != 1 {
			t.Fatalf("offset %d redelivered with count %d, want 1", o, n)
		}
	}
	t.Logf("old leader %d, new leader %d: 60 acknowledged records not redelivered, 40 redelivered", leader, newLeader)
}
