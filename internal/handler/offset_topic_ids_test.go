package handler_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestOffsetCommitFetchV10TopicIDs commits and fetches offsets with
// OffsetCommit v10 and OffsetFetch v10 (topics by id, KIP-848), raw kmsg
// over TCP: known ids round-trip with their ids in the answers, an
// unknown id is UNKNOWN_TOPIC_ID per partition, fetching every offset of
// the group names topics by id, and v9 still sees the same offsets by
// name.
func TestOffsetCommitFetchV10TopicIDs(t *testing.T) {
	n := startNode(t, "", groupProps)
	cl := n.client()
	createTopic(t, cl, "ids", 2, nil)
	td, err := kadm.NewClient(cl).ListTopics(ctx(t), "ids")
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte(td["ids"].ID)
	bogus := [16]byte{1, 2, 3}

	vs := kversion.Stable()
	if v, ok := vs.LookupMaxKeyVersion(8); !ok || v < 10 {
		t.Fatalf("kmsg's OffsetCommit max version %d: no v10", v)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 10, "gids", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{
		{TopicID: id, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42, LeaderEpoch: -1}, {Partition: 1, Offset: 7, LeaderEpoch: -1}}},
		{TopicID: bogus, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}},
	}
	var cresp *kmsg.OffsetCommitResponse
	for i := 0; ; i++ {
		cresp = request[*kmsg.OffsetCommitResponse](t, pinned(n, 8, 10), commit)
		if c := cresp.Topics[0].Partitions[0].ErrorCode; (c != kerr.CoordinatorNotAvailable.Code && c != kerr.CoordinatorLoadInProgress.Code && c != kerr.NotCoordinator.Code) || i > 50 {
			break
		}
	}
	byID := map[[16]byte][]int16{}
	for _, rt := range cresp.Topics {
		for _, p := range rt.Partitions {
			byID[rt.TopicID] = append(byID[rt.TopicID], p.ErrorCode)
		}
	}
	if c := byID[id]; len(c) != 2 || c[0] != 0 || c[1] != 0 {
		t.Errorf("commit by id: %v", c)
	}
	if c := byID[bogus]; len(c) != 1 || c[0] != kerr.UnknownTopicID.Code {
		t.Errorf("commit of an unknown id: %v, want UNKNOWN_TOPIC_ID", c)
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 10
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "gids", MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{
		{TopicID: id, Partitions: []int32{0, 1}}, {TopicID: bogus, Partitions: []int32{0}}}}}
	fresp := request[*kmsg.OffsetFetchResponse](t, pinned(n, 9, 10), fetch)
	got := map[[16]byte]map[int32][2]int64{} // id -> partition -> (offset, error)
	for _, rt := range fresp.Groups[0].Topics {
		got[rt.TopicID] = map[int32][2]int64{}
		for _, p := range rt.Partitions {
			got[rt.TopicID][p.Partition] = [2]int64{p.Offset, int64(p.ErrorCode)}
		}
	}
	if g := got[id]; g[0] != [2]int64{42, 0} || g[1] != [2]int64{7, 0} {
		t.Errorf("fetch by id: %v", g)
	}
	if g := got[bogus]; g[0] != [2]int64{-1, int64(kerr.UnknownTopicID.Code)} {
		t.Errorf("fetch of an unknown id: %v, want offset -1 UNKNOWN_TOPIC_ID", g)
	}

	// Every offset of the group: topics by id.
	fetch.Groups[0].Topics = nil
	fresp = request[*kmsg.OffsetFetchResponse](t, pinned(n, 9, 10), fetch)
	if ts := fresp.Groups[0].Topics; len(ts) != 1 || ts[0].TopicID != id || len(ts[0].Partitions) != 2 {
		t.Errorf("fetch of every offset: %+v", ts)
	}

	// v9 sees the same offsets by name.
	fetch.Version = 9
	fetch.Groups[0].Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "ids", Partitions: []int32{0}}}
	fresp = request[*kmsg.OffsetFetchResponse](t, pinned(n, 9, 9), fetch)
	if ts := fresp.Groups[0].Topics; len(ts) != 1 || ts[0].Topic != "ids" || ts[0].Partitions[0].Offset != 42 {
		t.Errorf("v9 fetch: %+v", ts)
	}
}
