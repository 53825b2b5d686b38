package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteRecords sends one DeleteRecords over TCP with a franz-go client.
func deleteRecords(t *testing.T, addr, topic string, offset int64, timeout time.Duration) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = int32(timeout.Milliseconds())
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// TestDeleteRecordsWaitsForFollowers: DeleteRecords answers once every
// live replica has raised its log start (the low watermark), as Kafka's
// DelayedDeleteRecords; while a follower does not fetch it times out, and
// a new leader never serves the deleted records again.
func TestDeleteRecordsWaitsForFollowers(t *testing.T) {
	q, ms := startCluster(t, 2)
	if err := ms[0].b.CreateTopic("dr", 1, 2, nil, false); err != nil {
		t.Fatal(err)
	}
	pm := partitionMeta(q, "dr", 0)
	leader, follower := ms[pm.Leader-1], ms[2-pm.Leader]
	for range 5 {
		if r := produceOne(t, leader.addr, "dr", -1, "v"); r.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// A live follower that does not fetch holds the low watermark back.
	fdir, faddr, fid := follower.dir, follower.addr, follower.id
	follower.stop()
	if r := deleteRecords(t, leader.addr, "dr", 3, 300*time.Millisecond); r.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("DeleteRecords with a follower down: %v, low watermark %d; want REQUEST_TIMED_OUT", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	follower = startMember(t, q, fid, fdir, faddr)
	r := deleteRecords(t, leader.addr, "dr", 3, 10*time.Second)
	if r.ErrorCode != 0 || r.LowWatermark < 3 {
		t.Fatalf("DeleteRecords once the follower fetches: %v, low watermark %d", kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	fp, err := follower.b.Partition("dr", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ls := fp.LogStartOffset(); ls < 3 {
		t.Fatalf("answered, but the follower's log starts at %d", ls)
	}
	// The follower takes over: the deleted records stay deleted.
	leader.stop()
	q.fence(leader.id)
	waitFor(t, "the follower leading", 10*time.Second, func() bool { return fp.IsLeader() })
	if ls := fp.LogStartOffset(); ls < 3 {
		t.Fatalf("the new leader starts at %d, below the deleted offset 3", ls)
	}
}
