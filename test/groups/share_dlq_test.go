package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareDLQAcrossNodes (KIP-1191): three nodes; the share partition is
// led by node 1 and the dead-letter topic's partition by node 2, so the
// copy goes over the inter-broker produce path (acks=all, replicated three
// ways). A franz-go share consumer rejects every record; a plain consumer
// reads each one back from the dead-letter topic with its key, value and
// __dlq.errors.* headers.
func TestShareDLQAcrossNodes(t *testing.T) {
	c := startClusterWith(t, nil)
	const topic, dlq, group, n = "orders", "dlq.orders", "dlq-workers", 20
	c.CreateTopic(topic, 1, 3, nil, [][]int32{{1, 2, 3}})
	c.CreateTopic(dlq, 1, 3, map[string]string{"errors.deadletterqueue.group.enable": "true"}, [][]int32{{2, 3, 1}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, kv := range [][2]string{{"share.auto.offset.reset", "earliest"}, {"errors.deadletterqueue.topic.name", dlq},
		{"errors.deadletterqueue.copy.record.enable", "true"}} {
		cf := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cf.Name, cf.Op, cf.Value = kv[0], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[1])
		rr.Configs = append(rr.Configs, cf)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, c.Client())
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group configs: %v %+v", err, resp)
	}
	prod := c.Client()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Key: []byte{byte('a' + i)}, Value: []byte{byte('A' + i)}}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The group config reaches every node through the metadata log; a
	// record rejected before its leader sees it is archived without a
	// copy, so wait until every node describes it.
	desc := c.Client()
	for id := int32(1); id <= 3; id++ {
		deadline := time.Now().Add(20 * time.Second)
		for {
			dreq := kmsg.NewPtrDescribeConfigsRequest()
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
			dr.ConfigNames = []string{"errors.deadletterqueue.topic.name"}
			dreq.Resources = append(dreq.Resources, dr)
			v := ""
			if kr, err := desc.Broker(int(id)).Request(ctx, dreq); err == nil && len(kr.(*kmsg.DescribeConfigsResponse).Resources) == 1 {
				d := kr.(*kmsg.DescribeConfigsResponse)
				for _, cf := range d.Resources[0].Configs {
					if cf.Value != nil {
						v = *cf.Value
					}
				}
			}
			if v == dlq {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: group config not seen", id)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	cons := c.Client(kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	defer cons.Close()
	for rejected := 0; rejected < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("rejected %d of %d", rejected, n)
		}
		for _, r := range fs.Records() {
			r.Ack(kgo.AckReject)
			rejected++
		}
		if err := cons.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}

	rd := c.Client(kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer rd.Close()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d dead letters", len(seen), n)
		}
		for _, r := range fs.Records() {
			h := map[string]string{}
			for _, kv := range r.Headers {
				h[kv.Key] = string(kv.Value)
			}
			if h["__dlq.errors.topic"] != topic || h["__dlq.errors.group"] != group || h["__dlq.errors.partition"] != "0" ||
				h["__dlq.errors.delivery.count"] != "1" || h["__dlq.errors.message"] != "Offset rejected by client." ||
				len(r.Key) != 1 || len(r.Value) != 1 || r.Value[0]-'A' != r.Key[0]-'a' {
				t.Fatalf("dead letter %q=%q headers %v", r.Key, r.Value, h)
			}
			seen[h["__dlq.errors.offset"]] = true
		}
	}
}
