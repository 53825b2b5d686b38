package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch/batchtest"
)

// txnProduce sends one transactional batch of pid under transactional id
// "tx-test".
func txnProduce(t *testing.T, cl *kgo.Client, topic string, pid int64, seq int32, vals ...string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	id := "tx-test"
	req.TransactionID = &id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batchtest.Build(batchtest.Options{Transactional: true, ProducerID: pid, BaseSequence: seq}, batchtest.Values(vals...))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0]
}

// writeMarker sends WriteTxnMarkers for pid on topic partition 0.
func writeMarker(t *testing.T, cl *kgo.Client, topic string, pid int64, epoch int16, coordEpoch int32, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return request[*kmsg.WriteTxnMarkersResponse](t, cl, req).Markers[0].Topics[0].Partitions[0].ErrorCode
}

// consumeIso reads topic partition 0 from the start until the end offset
// its isolation level sees, and returns the values.
func consumeIso(t *testing.T, n *node, topic string, committed bool) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := n.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchIsolationLevel(iso))
	defer cl.Close()
	var vals []string
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for c.Err() == nil {
		fs := cl.PollFetches(c)
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	return vals
}

func listLatest(t *testing.T, cl *kgo.Client, topic string, committed bool) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := request[*kmsg.ListOffsetsResponse](t, cl, req).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// TestReadCommittedPartitionSide: transactional batches are held back from
// read_committed consumers (a real franz-go consumer) until their marker;
// aborted ones are never shown to them and are to read_uncommitted ones;
// the last stable offset answers ListOffsets under READ_COMMITTED;
// markers with stale epochs are refused and append nothing.
func TestReadCommittedPartitionSide(t *testing.T) {
	// The transactions here have no coordinator: no verification, and
	// transaction version 1 (no implicit add to a transaction).
	n := startNode(t, "", map[string]string{"transaction.partition.verification.enable": "false", "sluice.transaction.version": "1"})
	cl := n.client()
	createTopic(t, cl, "rc", 1, nil)
	const a, b = 9001, 9002
	if r := txnProduce(t, cl, "rc", a, 0, "a1", "a2"); r.ErrorCode != 0 { // 0-1
		t.Fatalf("%+v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := txnProduce(t, cl, "rc", b, 0, "b1"); r.ErrorCode != 0 { // 2
		t.Fatalf("%+v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := listLatest(t, cl, "rc", true); got != 0 {
		t.Fatalf("LSO with two open transactions = %d, want 0", got)
	}
	if got := listLatest(t, cl, "rc", false); got != 3 {
		t.Fatalf("HW = %d, want 3", got)
	}
	if vals := consumeIso(t, n, "rc", true); len(vals) != 0 {
		t.Fatalf("read_committed saw open transactions: %v", vals)
	}
	// DescribeProducers (KIP-664) through kadm names both open transactions.
	dp, err := kadm.NewClient(cl).DescribeProducers(ctx(t), kadm.TopicsSet{"rc": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int64]int64{}
	dp.EachProducer(func(p kadm.DescribedProducer) { starts[p.ProducerID] = p.CurrentTxnStartOffset })
	if len(starts) != 2 || starts[a] != 0 || starts[b] != 2 {
		t.Fatalf("described producers: %v", starts)
	}
	// Abort a (marker at 3), commit b (marker at 4).
	if code := writeMarker(t, cl, "rc", a, 0, 5, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}
	if got := listLatest(t, cl, "rc", true); got != 2 {
		t.Fatalf("LSO with b open = %d, want 2", got)
	}
	if code := writeMarker(t, cl, "rc", b, 0, 5, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if got := listLatest(t, cl, "rc", true); got != 5 {
		t.Fatalf("LSO after both markers = %d, want 5", got)
	}
	// Stale epochs: nothing appended.
	if code := writeMarker(t, cl, "rc", b, 0, 4, true); code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("stale coordinator epoch: %v", kerr.ErrorForCode(code))
	}
	if r := txnProduce(t, cl, "rc", b, 1, "b2"); r.ErrorCode != 0 { // 5, b's next transaction
		t.Fatalf("%+v", kerr.ErrorForCode(r.ErrorCode))
	}
	if code := writeMarker(t, cl, "rc", b, 1, 5, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if code := writeMarker(t, cl, "rc", a, -1, 5, true); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale producer epoch: %v", kerr.ErrorForCode(code))
	}
	if got := listLatest(t, cl, "rc", false); got != 7 {
		t.Fatalf("HW = %d, want 7 (refused markers appended?)", got)
	}
	committed := consumeIso(t, n, "rc", true)
	if want := []string{"b1", "b2"}; !equalStrings(committed, want) {
		t.Fatalf("read_committed = %v, want %v", committed, want)
	}
	all := consumeIso(t, n, "rc", false)
	if want := []string{"a1", "a2", "b1", "b2"}; !equalStrings(all, want) {
		t.Fatalf("read_uncommitted = %v, want %v", all, want)
	}
	// Transactional records without a transactional id are refused.
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "rc"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batchtest.Build(batchtest.Options{Transactional: true, ProducerID: 77}, batchtest.Values("x"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if code := request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode; code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("no transactional id: %v", kerr.ErrorForCode(code))
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLateVersion2Marker: under transaction version 2 a marker's epoch is
// above its transaction's data. A marker (WriteTxnMarkers v2, transaction
// version 2) whose epoch equals that of the transaction open in the
// partition ended an earlier transaction and arrived late: it is refused
// and the open transaction stays open; the right marker ends it. The same
// marker under transaction version 1 (v1) is accepted, as in Kafka.
func TestLateVersion2Marker(t *testing.T) {
	n := startNode(t, "", map[string]string{"transaction.partition.verification.enable": "false", "sluice.transaction.version": "1"})
	cl := n.client()
	createTopic(t, cl, "late", 1, nil)
	const pid = 9100
	marker := func(version int16, tv int8, epoch int16) int16 {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Version = version
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion = pid, epoch, false, 1, tv
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "late", []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	// The producer's transaction at epoch 3 (its previous one ended with
	// a marker at epoch 3, which this one's data carries).
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	id := "late-v2"
	req.TransactionID = &id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "late"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batchtest.Build(batchtest.Options{Transactional: true, ProducerID: pid, ProducerEpoch: 3}, batchtest.Values("open"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if code := request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := marker(2, 2, 3); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a late version 2 marker at the open transaction's epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	if got := listLatest(t, cl, "late", true); got != 0 {
		t.Fatalf("LSO %d after the refused marker: the transaction must stay open", got)
	}
	if code := marker(2, 2, 4); code != 0 {
		t.Fatalf("the transaction's own marker: %v", kerr.ErrorForCode(code))
	}
	if got := listLatest(t, cl, "late", true); got != 2 {
		t.Fatalf("LSO %d after the marker, want 2", got)
	}
	// Version 1 markers carry the data's epoch and are not held to it.
	rp.Records = batchtest.Build(batchtest.Options{Transactional: true, ProducerID: pid, ProducerEpoch: 4}, batchtest.Values("v1"))
	req.Topics[0].Partitions[0] = rp
	if code := request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := marker(1, 0, 4); code != 0 {
		t.Fatalf("a version 1 marker: %v", kerr.ErrorForCode(code))
	}
}
