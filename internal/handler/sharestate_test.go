package handler_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/share/sharetest"
	"github.com/sluice-io/sluice/internal/sharecoord"
)

// shareProps keep __share_group_state small for tests.
var shareProps = map[string]string{
	"share.coordinator.state.topic.num.partitions":           "3",
	"share.coordinator.snapshot.update.records.per.snapshot": "2",
}

// stateRequest retries a share state request while its partition answers
// a coordinator error that goes away (the topic being created, the shard
// loading), and returns the response.
func stateRequest[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request, code func(R) int16) R {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := request[R](t, cl, req)
		switch c := code(resp); kerr.ErrorForCode(c) {
		case kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.NotCoordinator:
			if time.Now().After(deadline) {
				t.Fatalf("%T: still %v", req, kerr.ErrorForCode(c))
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return resp
	}
}

func initReq(group string, id [16]byte, part, epoch int32, start int64) *kmsg.InitializeShareGroupStateRequest {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = group
	t := kmsg.NewInitializeShareGroupStateRequestTopic()
	t.TopicID = id
	p := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	p.Partition, p.StateEpoch, p.StartOffset = part, epoch, start
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func readReq(group string, id [16]byte, part, leaderEpoch int32) *kmsg.ReadShareGroupStateRequest {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = group
	t := kmsg.NewReadShareGroupStateRequestTopic()
	t.TopicID = id
	p := kmsg.NewReadShareGroupStateRequestTopicPartition()
	p.Partition, p.LeaderEpoch = part, leaderEpoch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func writeReq(group string, id [16]byte, part, stateEpoch, leaderEpoch int32, start int64, batches ...share.StateBatch) *kmsg.WriteShareGroupStateRequest {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = group
	t := kmsg.NewWriteShareGroupStateRequestTopic()
	t.TopicID = id
	p := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	p.Partition, p.StateEpoch, p.LeaderEpoch, p.StartOffset, p.DeliveryCompleteCount = part, stateEpoch, leaderEpoch, start, int32(len(batches))
	for _, b := range batches {
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
		p.StateBatches = append(p.StateBatches, sb)
	}
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func summaryReq(group string, id [16]byte, part int32) *kmsg.ReadShareGroupStateSummaryRequest {
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = group
	t := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	t.TopicID = id
	p := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	p.Partition = part
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func deleteReq(group string, id [16]byte, part int32) *kmsg.DeleteShareGroupStateRequest {
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = group
	t := kmsg.NewDeleteShareGroupStateRequestTopic()
	t.TopicID = id
	p := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	p.Partition = part
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func initCode(r *kmsg.InitializeShareGroupStateResponse) int16 {
	return r.Topics[0].Partitions[0].ErrorCode
}
func readCode(r *kmsg.ReadShareGroupStateResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }
func writeCode(r *kmsg.WriteShareGroupStateResponse) int16 {
	return r.Topics[0].Partitions[0].ErrorCode
}
func deleteCode(r *kmsg.DeleteShareGroupStateResponse) int16 {
	return r.Topics[0].Partitions[0].ErrorCode
}
func summaryCode(r *kmsg.ReadShareGroupStateSummaryResponse) int16 {
	return r.Topics[0].Partitions[0].ErrorCode
}

func readBatches(r *kmsg.ReadShareGroupStateResponse) []share.StateBatch {
	var out []share.StateBatch
	for _, b := range r.Topics[0].Partitions[0].StateBatches {
		out = append(out, share.StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
	}
	return out
}

// TestShareGroupStateAPIs drives InitializeShareGroupState,
// ReadShareGroupState, WriteShareGroupState, ReadShareGroupStateSummary
// and DeleteShareGroupState over TCP against a one-node broker, and reads
// the state again after a restart (replayed from __share_group_state).
func TestShareGroupStateAPIs(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, shareProps)
	cl := n.client()
	id := shareTopic(t, n, cl, "share-state", 1)
	const group = "sg"

	// FindCoordinator v6, key type 2: this node.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 6
	fc.CoordinatorType = 2
	key := sharecoord.CoordinatorKey(share.Key{Group: group, TopicID: id, Partition: 0})
	fc.CoordinatorKeys = []string{key, "not-a-share-key"}
	var fr *kmsg.FindCoordinatorResponse
	testclusterWait(t, func() bool {
		fr = request[*kmsg.FindCoordinatorResponse](t, cl, fc)
		return fr.Coordinators[0].ErrorCode == 0
	})
	if c := fr.Coordinators[0]; c.NodeID != n.b.NodeID() || c.Key != key {
		t.Fatalf("share coordinator = %+v", c)
	}
	if c := fr.Coordinators[1]; c.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("malformed share key answered %v", kerr.ErrorForCode(c.ErrorCode))
	}

	if c := initCode(stateRequest(t, cl, initReq(group, id, 0, 1, 10), initCode)); c != 0 {
		t.Fatalf("initialize: %v", kerr.ErrorForCode(c))
	}
	rr := stateRequest(t, cl, readReq(group, id, 0, 3), readCode)
	if p := rr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StateEpoch != 1 || p.StartOffset != 10 || len(p.StateBatches) != 0 {
		t.Fatalf("read after initialize: %+v", p)
	}
	// Five writes: with a snapshot every 2 updates, snapshots and updates
	// alternate in the log.
	acked := share.StateBatch{FirstOffset: 10, LastOffset: 12, DeliveryState: share.StateAcknowledged, DeliveryCount: 1}
	for i := range int16(5) {
		avail := share.StateBatch{FirstOffset: 13, LastOffset: 15, DeliveryState: share.StateAvailable, DeliveryCount: i + 1}
		if c := writeCode(stateRequest(t, cl, writeReq(group, id, 0, 1, 3, 10, acked, avail), writeCode)); c != 0 {
			t.Fatalf("write %d: %v", i, kerr.ErrorForCode(c))
		}
	}
	want := []share.StateBatch{acked, {FirstOffset: 13, LastOffset: 15, DeliveryState: share.StateAvailable, DeliveryCount: 5}}
	if got := readBatches(stateRequest(t, cl, readReq(group, id, 0, 3), readCode)); !reflect.DeepEqual(got, want) {
		t.Fatalf("batches = %v, want %v", got, want)
	}
	// Fenced: an older leader epoch (the read recorded 3), an older state
	// epoch, a read from an older leader.
	if c := writeCode(request[*kmsg.WriteShareGroupStateResponse](t, cl, writeReq(group, id, 0, 1, 2, 11))); c != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("write from leader epoch 2: %v", kerr.ErrorForCode(c))
	}
	if c := writeCode(request[*kmsg.WriteShareGroupStateResponse](t, cl, writeReq(group, id, 0, 0, 3, 11))); c != kerr.FencedStateEpoch.Code {
		t.Fatalf("write at state epoch 0: %v", kerr.ErrorForCode(c))
	}
	if c := readCode(request[*kmsg.ReadShareGroupStateResponse](t, cl, readReq(group, id, 0, 2))); c != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("read from leader epoch 2: %v", kerr.ErrorForCode(c))
	}
	// Bad input: nothing changes. A partition the topic does not have,
	// a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION.
	if c := writeCode(request[*kmsg.WriteShareGroupStateResponse](t, cl, writeReq(group, id, 1, 1, 3, 10))); c != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("write of partition 1 of a 1-partition topic: %v", kerr.ErrorForCode(c))
	}
	if c := readCode(request[*kmsg.ReadShareGroupStateResponse](t, cl, readReq(group, [16]byte{1}, 0, 3))); c != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("read of an unknown topic: %v", kerr.ErrorForCode(c))
	}
	bad := writeReq(group, id, 0, 1, 3, 10, share.StateBatch{FirstOffset: 5, LastOffset: 4})
	if c := writeCode(request[*kmsg.WriteShareGroupStateResponse](t, cl, bad)); c != kerr.InvalidRequest.Code {
		t.Fatalf("write of a batch ending before it starts: %v", kerr.ErrorForCode(c))
	}
	if c := writeCode(request[*kmsg.WriteShareGroupStateResponse](t, cl, writeReq("", id, 0, 1, 3, 10))); c != kerr.InvalidRequest.Code {
		t.Fatalf("write for an empty group id: %v", kerr.ErrorForCode(c))
	}
	sr := stateRequest(t, cl, summaryReq(group, id, 0), summaryCode)
	if p := sr.Topics[0].Partitions[0]; p.StateEpoch != 1 || p.LeaderEpoch != 3 || p.StartOffset != 10 || p.DeliveryCompleteCount != 2 {
		t.Fatalf("summary: %+v", p)
	}

	// Restart: the state is replayed from __share_group_state.
	n.stop()
	n = startNode(t, dir, shareProps)
	cl = n.client()
	if got := readBatches(stateRequest(t, cl, readReq(group, id, 0, 3), readCode)); !reflect.DeepEqual(got, want) {
		t.Fatalf("batches after restart = %v, want %v", got, want)
	}
	if c := writeCode(stateRequest(t, cl, writeReq(group, id, 0, 1, 2, 11), writeCode)); c != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("after restart, write from leader epoch 2: %v", kerr.ErrorForCode(c))
	}

	if c := deleteCode(stateRequest(t, cl, deleteReq(group, id, 0), deleteCode)); c != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(c))
	}
	if p := stateRequest(t, cl, readReq(group, id, 0, 3), readCode).Topics[0].Partitions[0]; p.StartOffset != -1 || len(p.StateBatches) != 0 {
		t.Fatalf("read after delete: %+v", p)
	}
	n.stop()
	n = startNode(t, dir, shareProps)
	cl = n.client()
	if p := stateRequest(t, cl, readReq(group, id, 0, 3), readCode).Topics[0].Partitions[0]; p.StartOffset != -1 {
		t.Fatalf("read after delete and restart: %+v", p)
	}
}

// shareTopic creates topic with partitions partitions and returns its id.
func shareTopic(t *testing.T, n *node, cl *kgo.Client, topic string, partitions int32) [16]byte {
	t.Helper()
	createTopic(t, cl, topic, partitions, nil)
	var id [16]byte
	testclusterWait(t, func() bool {
		mt := n.b.Image().Topics[topic]
		if mt == nil {
			return false
		}
		id = mt.ID
		return true
	})
	return id
}

// testclusterWait polls cond for up to 20 s.
func testclusterWait(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSharePersisterConformance runs the Persister conformance table on
// the broker's Persister (the local share coordinator) and on one that
// reaches the same coordinator over TCP with the RPCs 83..87.
func TestSharePersisterConformance(t *testing.T) {
	n := startNode(t, "", shareProps)
	id := shareTopic(t, n, n.client(), "conformance", 8)
	t.Run("local", func(t *testing.T) {
		sharetest.PersisterConformance(t, n.h.SharePersister(), "local", id)
	})
	t.Run("rpc", func(t *testing.T) {
		cl := n.client()
		p := sharecoord.NewPersisterWith(n.h.ShareCoordinator(), -1, func(ctx context.Context, _ int32, req kmsg.Request) (kmsg.Response, error) {
			return cl.Request(ctx, req)
		})
		sharetest.PersisterConformance(t, p, "rpc", id)
	})
}

// TestShareStatePruned writes to one share partition often and to another
// once, with a prune every 100 ms: the log start offset of
// __share_group_state moves up (the cold share partition gets new
// snapshots, the hot one's old updates go), and after a restart both
// states read back whole.
func TestShareStatePruned(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{
		"share.coordinator.state.topic.num.partitions":           "1",
		"share.coordinator.snapshot.update.records.per.snapshot": "3",
		"share.coordinator.state.topic.prune.interval.ms":        "100",
	}
	n := startNode(t, dir, props)
	cl := n.client()
	id := shareTopic(t, n, cl, "pruned", 1)
	if c := initCode(stateRequest(t, cl, initReq("cold", id, 0, 0, 5), initCode)); c != 0 {
		t.Fatalf("initialize: %v", kerr.ErrorForCode(c))
	}
	coldWant := []share.StateBatch{{FirstOffset: 5, LastOffset: 6, DeliveryState: share.StateArchived, DeliveryCount: 2}}
	if c := writeCode(stateRequest(t, cl, writeReq("cold", id, 0, 0, 1, 5, coldWant...), writeCode)); c != 0 {
		t.Fatalf("write: %v", kerr.ErrorForCode(c))
	}
	var hotWant []share.StateBatch
	for i := range int64(40) {
		hotWant = []share.StateBatch{{FirstOffset: i, LastOffset: i + 2, DeliveryState: share.StateAvailable, DeliveryCount: 1}}
		if c := writeCode(stateRequest(t, cl, writeReq("hot", id, 0, 0, 1, i, hotWant...), writeCode)); c != 0 {
			t.Fatalf("write %d: %v", i, kerr.ErrorForCode(c))
		}
		time.Sleep(10 * time.Millisecond)
	}
	logStart := func() int64 {
		p, err := n.b.Partition(sharecoord.Topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p.LogStartOffset()
	}
	testclusterWait(t, func() bool { return logStart() > 20 })
	time.Sleep(300 * time.Millisecond) // a few more prunes
	t.Logf("log start offset of %s-0: %d", sharecoord.Topic, logStart())

	n.stop()
	n = startNode(t, dir, props)
	cl = n.client()
	t.Logf("after the restart: log start offset %d", logStart())
	if got := readBatches(stateRequest(t, cl, readReq("cold", id, 0, 1), readCode)); !reflect.DeepEqual(got, coldWant) {
		t.Fatalf("cold state after pruning and a restart: %v, want %v", got, coldWant)
	}
	if got := readBatches(stateRequest(t, cl, readReq("hot", id, 0, 1), readCode)); !reflect.DeepEqual(got, hotWant) {
		t.Fatalf("hot state after pruning and a restart: %v, want %v", got, hotWant)
	}
}

// TestShareStateTopicInternal: __share_group_state is one of Kafka's
// internal topics: Metadata marks it so (clients' regex subscriptions skip
// it) and clients may not produce to it.
func TestShareStateTopicInternal(t *testing.T) {
	n := startNode(t, "", shareProps)
	cl := n.client()
	id := [16]byte{3}
	stateRequest(t, cl, initReq("g", id, 0, 0, 0), initCode)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(sharecoord.Topic)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.MetadataResponse](t, cl, req)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || !resp.Topics[0].IsInternal {
		t.Fatalf("metadata of %s: %+v", sharecoord.Topic, resp.Topics)
	}
	err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: sharecoord.Topic, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", sharecoord.Topic, err)
	}
}
