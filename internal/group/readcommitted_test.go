package group

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
)

// heldReplica is a broker partition whose high watermark the test holds
// below its log end: the records above it are not committed (as those a
// new coordinator loads from its log end).
type heldReplica struct {
	*broker.Partition
	held *atomic.Int64 // the HW shown, -1 for the partition's own
}

func (r heldReplica) HighWatermark() int64 {
	if h := r.held.Load(); h >= 0 {
		return min(h, r.Partition.HighWatermark())
	}
	return r.Partition.HighWatermark()
}

// steppedCommit commits offset off of t-0 for group g on a stepped
// coordinator.
func steppedCommit(t *testing.T, c *Coordinator, g string, off int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, g, -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: off, LeaderEpoch: -1}}}}
	resp := pollGroup(t, c, c.OffsetCommit(req))
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("OffsetCommit: code %d", code)
	}
}

// pollGroup drains c until r's answer is there.
func pollGroup[T any](t *testing.T, c *Coordinator, r Result[T]) T {
	t.Helper()
	if r.Wait == nil {
		return r.Resp
	}
	for i := 0; i < 5000; i++ {
		c.Drain()
		if v, ok := r.Poll(); ok {
			return v
		}
		time.Sleep(time.Millisecond) // the broker's flush, in the background, moves the HW
	}
	t.Fatal("no answer")
	var zero T
	return zero
}

// TestOffsetFetchAnswersCommittedState: a coordinator loaded with an
// offset commit above the high watermark does not return that offset
// until it is committed. Returned at once, a failover to a replica
// without the record would make the next OffsetFetch go back to the
// earlier offset, and a consumer reprocess from there.
func TestOffsetFetchAnswersCommittedState(t *testing.T) {
	for _, version := range []int16{7, 8} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { testOffsetFetchCommitted(t, version) })
	}
}

// heldCoordinator is a stepped coordinator of one offsets partition
// whose high watermark the test holds (heldReplica).
func heldCoordinator(t *testing.T) (*Coordinator, *atomic.Int64) {
	t.Helper()
	b := openBroker(t, t.TempDir())
	if err := b.CreateTopic(OffsetsTopic, 1, 1, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	held := &atomic.Int64{}
	held.Store(-1)
	c := New(b, Options{Config: ConfigFrom(b.Config()), Clock: clock.NewManual(time.Now()), Stepped: true,
		wrapReplica: func(p *broker.Partition) logReplica { return heldReplica{p, held} }})
	t.Cleanup(c.Close)
	c.Drain()
	return c, held
}

// reloadHeld loads the partition again with the high watermark held
// below its last record: a coordinator elected on a replica whose last
// record is not committed yet.
func reloadHeld(t *testing.T, c *Coordinator, held *atomic.Int64) {
	t.Helper()
	var end int64
	if err := c.run("g", func(s *shard) { end = s.Replica().LogEndOffset() }); err != nil {
		t.Fatal(err)
	}
	held.Store(end - 1)
	c.Resign(0)
	c.Drain()
	c.Elect(0)
	c.Drain()
}

// notAnswered fails if r is answered while the test steps c.
func notAnswered[T any](t *testing.T, c *Coordinator, r Result[T], what string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		c.Drain()
		if r.Wait == nil {
			t.Fatalf("%s answered (%+v) from a state above the HW", what, r.Resp)
		}
		if v, ok := r.Poll(); ok {
			t.Fatalf("%s answered (%+v) from a state above the HW", what, v)
		}
	}
}

func testOffsetFetchCommitted(t *testing.T, version int16) {
	c, held := heldCoordinator(t)
	steppedCommit(t, c, "g", 10)
	steppedCommit(t, c, "g", 20) // the last record
	reloadHeld(t, c, held)

	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = version, "g"
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if version >= 8 {
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
	}
	offset := func(resp *kmsg.OffsetFetchResponse) int64 {
		if version >= 8 {
			return resp.Groups[0].Topics[0].Partitions[0].Offset
		}
		return resp.Topics[0].Partitions[0].Offset
	}
	r := c.OffsetFetch(req)
	notAnswered(t, c, r, "OffsetFetch")
	held.Store(-1)
	if got := offset(pollGroup(t, c, r)); got != 20 {
		t.Fatalf("OffsetFetch once committed: %d, want 20", got)
	}
}

// TestDescribeGroupsAnswersCommittedState: a group known only from a
// record above the high watermark is not described until the record is
// committed (a coordinator elected next may not have it).
func TestDescribeGroupsAnswersCommittedState(t *testing.T) {
	c, held := heldCoordinator(t)
	steppedCommit(t, c, "other", 1)
	steppedCommit(t, c, "g", 10) // g's only record, the last
	reloadHeld(t, c, held)
	r := c.DescribeGroups(&kmsg.DescribeGroupsRequest{Groups: []string{"g"}})
	notAnswered(t, c, r, "DescribeGroups")
	held.Store(-1)
	if rg := pollGroup(t, c, r).Groups[0]; rg.ErrorCode != 0 || rg.State != Empty.String() {
		t.Fatalf("DescribeGroups once committed: %+v, want Empty", rg)
	}
}
