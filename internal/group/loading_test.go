package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/coord"
)

// TestLoadingAnswersLoadInProgress: while a group's __consumer_offsets
// partition is still loading, group requests answer
// COORDINATOR_LOAD_IN_PROGRESS (Kafka's CoordinatorRuntime for a partition
// in state LOADING), which clients retry at the same coordinator; once
// loaded they are served. librdkafka's KIP-848 consumer gives up an
// OffsetFetch answered COORDINATOR_NOT_AVAILABLE instead.
func TestLoadingAnswersLoadInProgress(t *testing.T) {
	if got := runError(coord.ErrLoading); got != kerr.CoordinatorLoadInProgress {
		t.Fatalf("loading maps to %v, want COORDINATOR_LOAD_IN_PROGRESS", got)
	}
	b := openBroker(t, t.TempDir())
	if err := b.CreateTopic(OffsetsTopic, 3, 1, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	cfg := ConfigFrom(b.Config())
	// A first coordinator commits an offset, so the partition has
	// records to replay.
	first := New(b, Options{Config: cfg, Clock: clock.NewManual(time.Now()), Stepped: true})
	first.Drain()
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "g", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42, LeaderEpoch: -1}}}}
	r := first.OffsetCommit(commit)
	for i := 0; r.Wait != nil; i++ {
		if _, ok := r.Poll(); ok {
			break
		}
		if i == 5000 {
			t.Fatal("OffsetCommit never answered")
		}
		first.Drain()
		time.Sleep(time.Millisecond)
	}
	first.Close()

	// A stepped coordinator replays only when stepped: the elected shard
	// stays loading until Drain.
	c := New(b, Options{Config: cfg, Clock: clock.NewManual(time.Now()), Stepped: true})
	t.Cleanup(c.Close)
	c.Elect(PartitionFor("g", 3))
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 5, "g"
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if code := c.OffsetFetch(fetch).Get().ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("OffsetFetch while loading: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	c.Drain()
	if resp := c.OffsetFetch(fetch).Get(); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].Offset != 42 {
		t.Fatalf("OffsetFetch once loaded: %+v", resp)
	}
}
