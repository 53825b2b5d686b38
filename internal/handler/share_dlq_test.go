package handler_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/share"
)

// dlqProps are the broker settings of the dead-letter tests: one-second
// locks, share groups' members quick to join.
var dlqProps = func() map[string]string {
	m := maps.Clone(sharePartProps)
	maps.Copy(m, shareGroupProps)
	return m
}()

// readAll reads every record of topic from the start with a plain
// consumer, waiting until there are want of them.
func readAll(t *testing.T, n *node, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(c)
		if c.Err() != nil {
			t.Fatalf("%s: %d records, want %d", topic, len(out), want)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// headers returns r's headers by key.
func headers(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// TestShareDLQRejectAndDeliveryLimit (KIP-1191): a franz-go share consumer
// rejects one record and releases another until the group's delivery limit
// (2); both are copied to the group's dead-letter topic, with the key and
// value (errors.deadletterqueue.copy.record.enable) and Kafka's
// __dlq.errors.* context headers, and only then does the share partition's
// start offset move past them. A plain consumer reads the dead-letter topic.
func TestShareDLQRejectAndDeliveryLimit(t *testing.T) {
	n := startNode(t, "", dlqProps)
	const topic, dlq, group = "work", "dlq.work", "workers"
	createTopic(t, n.client(), topic, 1, nil)
	yes := "true"
	createTopic(t, n.client(), dlq, 1, map[string]*string{"errors.deadletterqueue.group.enable": &yes})
	for k, v := range map[string]string{"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "2",
		"errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.copy.record.enable": "true"} {
		setGroupConfig(t, n, group, k, v)
	}
	prod := n.client()
	for _, r := range []*kgo.Record{
		{Topic: topic, Key: []byte("k-poison"), Value: []byte("poison"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}},
		{Topic: topic, Key: []byte("k-flaky"), Value: []byte("flaky")},
		{Topic: topic, Key: []byte("k-fine"), Value: []byte("fine")},
	} {
		if err := prod.ProduceSync(ctx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	written := testutil.ToFloat64(metrics.ShareDLQRecords.WithLabelValues("written"))
	cons := n.client(kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	deliveries := map[string]int{}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for deliveries["poison"] < 1 || deliveries["flaky"] < 2 || deliveries["fine"] < 1 {
		fs := cons.PollFetches(c)
		if c.Err() != nil {
			t.Fatalf("deliveries %v", deliveries)
		}
		for _, r := range fs.Records() {
			deliveries[string(r.Value)]++
			switch string(r.Value) {
			case "poison":
				r.Ack(kgo.AckReject)
			case "flaky":
				r.Ack(kgo.AckRelease)
			default:
				r.Ack(kgo.AckAccept)
			}
		}
		if err := cons.FlushAcks(c); err != nil {
			t.Fatal(err)
		}
	}

	recs := readAll(t, n, dlq, 2)
	if len(recs) != 2 {
		t.Fatalf("%d dead-letter records, want 2", len(recs))
	}
	type dead struct {
		key, value string
		headers    map[string]string
	}
	got := map[string]dead{}
	for _, r := range recs {
		got[headers(r)["__dlq.errors.offset"]] = dead{string(r.Key), string(r.Value), headers(r)}
	}
	want := map[string]dead{
		"0": {"k-poison", "poison", map[string]string{"__dlq.errors.topic": topic, "__dlq.errors.partition": "0", "__dlq.errors.offset": "0",
			"__dlq.errors.group": group, "__dlq.errors.delivery.count": "1", "__dlq.errors.message": "Offset rejected by client."}},
		"1": {"k-flaky", "flaky", map[string]string{"__dlq.errors.topic": topic, "__dlq.errors.partition": "0", "__dlq.errors.offset": "1",
			"__dlq.errors.group": group, "__dlq.errors.delivery.count": "2", "__dlq.errors.message": "Offset delivery count exceeded the threshold."}},
	}
	for off, w := range want {
		g := got[off]
		if g.key != w.key || g.value != w.value || !maps.Equal(g.headers, w.headers) {
			t.Errorf("dead letter of offset %s: %+v\nwant %+v", off, g, w)
		}
	}
	id, _ := n.b.TopicID(topic)
	key := share.Key{Group: group, TopicID: id, Partition: 0}
	waitFor(t, func() bool {
		sp := n.h.SharePartitions().Held(key)
		start, _ := sp.Offsets()
		return start == 3
	}, "SPSO past the dead-lettered records")
	if st := n.h.ShareDeadLetters(); st.Records != 2 || st.Failed != 0 || st.Dropped != 0 {
		t.Fatalf("writer stats %+v", st)
	}
	if d := testutil.ToFloat64(metrics.ShareDLQRecords.WithLabelValues("written")) - written; d != 2 {
		t.Fatalf("sluice_share_dlq_records_total{outcome=written} grew by %v, want 2", d)
	}
}

// rejectAll has a share consumer of group reject every record of topic
// until it rejected n.
func rejectAll(t *testing.T, n *node, group, topic string, want int) {
	t.Helper()
	cons := n.client(kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for seen := 0; seen < want; {
		fs := cons.PollFetches(c)
		if c.Err() != nil {
			t.Fatalf("rejected %d of %d", seen, want)
		}
		for _, r := range fs.Records() {
			r.Ack(kgo.AckReject)
			seen++
		}
		if err := cons.FlushAcks(c); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShareDLQAutoCreateHeadersOnly: without
// errors.deadletterqueue.copy.record.enable the dead-letter record has the
// context headers and no key or value; a missing dead-letter topic is
// created when errors.deadletterqueue.auto.create.topics.enable, open to
// groups (errors.deadletterqueue.group.enable=true). Without it, the
// record is archived without a copy (counted as failed) and SPSO moves on.
func TestShareDLQAutoCreateHeadersOnly(t *testing.T) {
	props := maps.Clone(dlqProps)
	props["errors.deadletterqueue.auto.create.topics.enable"] = "true"
	n := startNode(t, "", props)
	const topic = "jobs"
	createTopic(t, n.client(), topic, 1, nil)
	produceTo(t, manualClient(n), topic, 0, "bad")
	setGroupConfig(t, n, "g1", "share.auto.offset.reset", "earliest")
	setGroupConfig(t, n, "g1", "errors.deadletterqueue.topic.name", "dlq.auto")
	rejectAll(t, n, "g1", topic, 1)
	recs := readAll(t, n, "dlq.auto", 1)
	if r := recs[0]; r.Key != nil || r.Value != nil || headers(r)["__dlq.errors.group"] != "g1" || headers(r)["__dlq.errors.offset"] != "0" {
		t.Fatalf("dead letter key %q value %q headers %v", r.Key, r.Value, headers(r))
	}
	if v := n.b.Image().Topics["dlq.auto"].Configs["errors.deadletterqueue.group.enable"]; v != "true" {
		t.Fatalf("created dead-letter topic: errors.deadletterqueue.group.enable=%q", v)
	}

	// Auto-creation off (dynamic, cluster-wide): the copy fails for good.
	setClusterConfig(t, n, "errors.deadletterqueue.auto.create.topics.enable", "false")
	setGroupConfig(t, n, "g2", "share.auto.offset.reset", "earliest")
	setGroupConfig(t, n, "g2", "errors.deadletterqueue.topic.name", "dlq.missing")
	rejectAll(t, n, "g2", topic, 1)
	id, _ := n.b.TopicID(topic)
	waitFor(t, func() bool {
		start, _ := n.h.SharePartitions().Held(share.Key{Group: "g2", TopicID: id, Partition: 0}).Offsets()
		return start == 1
	}, "SPSO past the record without a dead-letter topic")
	if _, ok := n.b.Image().Topics["dlq.missing"]; ok {
		t.Fatal("dlq.missing was created")
	}
	if st := n.h.ShareDeadLetters(); st.Records != 1 || st.Failed != 1 {
		t.Fatalf("writer stats %+v", st)
	}
}

// setClusterConfig sets a cluster-wide dynamic broker config with kadm
// and waits for the broker to see it.
func setClusterConfig(t *testing.T, n *node, name, value string) {
	t.Helper()
	rs, err := kadm.NewClient(n.client()).AlterBrokerConfigs(ctx(t), []kadm.AlterConfig{{Name: name, Value: kadm.StringPtr(value)}})
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("set %s=%s: %v %+v", name, value, err, rs)
	}
	waitFor(t, func() bool { return n.b.Image().BrokerConfigs[""][name] == value }, name)
}

// TestShareDLQOffBelowShareVersion2: the dead-letter queue is a
// share.version 2 feature (KIP-1191). A group whose dead-letter topic was
// set at 2 copies nothing once the cluster is downgraded to 1: a rejected
// record is archived at once.
func TestShareDLQOffBelowShareVersion2(t *testing.T) {
	rn := startRaftNode(t, dlqProps)
	n := rn.node
	const topic, dlq, group = "jobs", "dlq.jobs", "g"
	createTopic(t, n.client(), topic, 1, nil)
	yes := "true"
	createTopic(t, n.client(), dlq, 1, map[string]*string{"errors.deadletterqueue.group.enable": &yes})
	produceTo(t, manualClient(n), topic, 0, "bad")
	setGroupConfig(t, n, group, "share.auto.offset.reset", "earliest")
	setGroupConfig(t, n, group, "errors.deadletterqueue.topic.name", dlq)
	setShareVersion(t, n, 1)
	rejectAll(t, n, group, topic, 1)
	id, _ := n.b.TopicID(topic)
	start, _ := n.h.SharePartitions().Held(share.Key{Group: group, TopicID: id, Partition: 0}).Offsets()
	if start != 1 {
		t.Fatalf("SPSO %d right after the reject, want 1 (archived at once)", start)
	}
	if st := n.h.ShareDeadLetters(); st != (handler.DeadLetterStats{}) {
		t.Fatalf("writer stats %+v at share.version 1", st)
	}
	offs, err := kadm.NewClient(n.client()).ListEndOffsets(ctx(t), dlq)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup(dlq, 0); o.Offset != 0 {
		t.Fatalf("dead-letter topic end offset %d at share.version 1", o.Offset)
	}
}
