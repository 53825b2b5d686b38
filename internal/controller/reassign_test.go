package controller

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// testImage: brokers 1..3 active, topic "t" with one partition on
// replicas, led by the first, ISR = replicas.
func testImage(replicas ...int32) *metadata.Image {
	im := emptyImage()
	for id := int32(1); id <= 3; id++ {
		im.Brokers[id] = metadata.Broker{ID: id, Epoch: int64(id)}
	}
	im.Topics["t"] = &metadata.Topic{Name: "t", Partitions: []metadata.Partition{{
		Index: 0, Leader: replicas[0], Replicas: slices.Clone(replicas), ISR: slices.Clone(replicas),
	}}}
	return im
}

// step runs fn on a batch over im and returns the image after its records,
// checking that replaying the records from im gives the same image (apply
// is a pure function of the records).
func step(t *testing.T, im *metadata.Image, fn func(b *batch) error) (*metadata.Image, error) {
	t.Helper()
	b := &batch{tx: newTxn(im)}
	err := fn(b)
	replay := newTxn(im)
	data, _ := json.Marshal(b.records())
	var recs []record
	if e := json.Unmarshal(data, &recs); e != nil {
		t.Fatal(e)
	}
	for i := range recs {
		replay.apply(&recs[i], 1)
	}
	got, _ := json.Marshal(b.tx.im)
	want, _ := json.Marshal(replay.im)
	if string(got) != string(want) {
		t.Fatalf("replayed records differ:\n%s\n%s", got, want)
	}
	return b.tx.im, err
}

func part0(im *metadata.Image) metadata.Partition { return im.Topics["t"].Partitions[0] }

func wantPart(t *testing.T, im *metadata.Image, leader int32, replicas, isr, adding, removing []int32) {
	t.Helper()
	p := part0(im)
	if p.Leader != leader || !slices.Equal(p.Replicas, replicas) || !slices.Equal(p.ISR, isr) ||
		!slices.Equal(p.AddingReplicas, adding) || !slices.Equal(p.RemovingReplicas, removing) {
		t.Fatalf("partition %+v, want leader %d replicas %v isr %v adding %v removing %v", p, leader, replicas, isr, adding, removing)
	}
}

func reassign(replicas ...int32) func(b *batch) error {
	return func(b *batch) error {
		return b.reassignOne(metadata.Reassignment{Topic: "t", Partition: 0, Replicas: replicas})
	}
}

func TestReassignCompletesWhenTargetInISR(t *testing.T) {
	im := testImage(1, 2)
	im, err := step(t, im, reassign(2, 3))
	if err != nil {
		t.Fatal(err)
	}
	// The union, target first; the leader and ISR stay.
	wantPart(t, im, 1, []int32{2, 3, 1}, []int32{1, 2}, []int32{3}, []int32{1})
	p := part0(im)
	// A replica leaving the ISR does not complete it.
	var resp metadata.AlterPartitionResponse
	im2, _ := step(t, im, func(b *batch) error {
		resp = alterOne(b, &metadata.AlterPartitionRequest{Topic: "t", BrokerID: 1, BrokerEpoch: 1,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{1}})
		return nil
	})
	if resp.Error != 0 {
		t.Fatalf("shrink: %d", resp.Error)
	}
	wantPart(t, im2, 1, []int32{2, 3, 1}, []int32{1}, []int32{3}, []int32{1})
	// The leader adds the caught-up replica 3: every target replica is in
	// the ISR, so the reassignment completes in the same change; leader 1
	// is removed, 2 (first target replica in the ISR) leads.
	im, _ = step(t, im, func(b *batch) error {
		resp = alterOne(b, &metadata.AlterPartitionRequest{Topic: "t", BrokerID: 1, BrokerEpoch: 1,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{1, 2, 3}})
		return nil
	})
	if resp.Error != kerr.NewLeaderElected.Code {
		t.Fatalf("completing AlterPartition answered %d, want NEW_LEADER_ELECTED", resp.Error)
	}
	wantPart(t, im, 2, []int32{2, 3}, []int32{2, 3}, nil, nil)
	if q := part0(im); q.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("leader epoch %d after a leader change from %d", q.LeaderEpoch, p.LeaderEpoch)
	}
}

func TestReassignCancelAndReplace(t *testing.T) {
	im := testImage(1, 2)
	if _, err := step(t, im, reassign()); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel with none in progress: %v", err)
	}
	im, _ = step(t, im, reassign(2, 3))
	// Replacing starts from the original replicas {1,2}: {3,1} adds 3 and
	// removes 2.
	im2, err := step(t, im, reassign(3, 1))
	if err != nil {
		t.Fatal(err)
	}
	wantPart(t, im2, 1, []int32{3, 1, 2}, []int32{1, 2}, []int32{3}, []int32{2})
	// Cancelling reverts to the original replicas (Kafka's revert keeps
	// the merged order) and leaves the ISR without the adding replicas.
	im, err = step(t, im, reassign())
	if err != nil {
		t.Fatal(err)
	}
	wantPart(t, im, 1, []int32{2, 1}, []int32{1, 2}, nil, nil)
}

func TestReassignImmediateAndInvalid(t *testing.T) {
	im := testImage(1, 2)
	// Dropping replica 1, the leader: the ISR already holds the target.
	got, err := step(t, im, reassign(2))
	if err != nil {
		t.Fatal(err)
	}
	wantPart(t, got, 2, []int32{2}, []int32{2}, nil, nil)
	// A reordering changes the replicas (and so the preferred leader) only.
	got, _ = step(t, im, reassign(2, 1))
	wantPart(t, got, 1, []int32{2, 1}, []int32{1, 2}, nil, nil)
	for _, bad := range [][]int32{{}, {1, 1}, {1, 9}} {
		if _, err := step(t, im, reassign(bad...)); !errors.Is(err, kerr.InvalidReplicaAssignment) {
			t.Errorf("target %v: %v", bad, err)
		}
	}
	if _, err := step(t, im, func(b *batch) error {
		return b.reassignOne(metadata.Reassignment{Topic: "t", Partition: 1, Replicas: []int32{1}})
	}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown partition: %v", err)
	}
}

// A target the ISR already holds completes in the starting change: the
// removed leader hands over to the first target replica.
func TestReassignWithinISR(t *testing.T) {
	im, err := step(t, testImage(1, 2, 3), reassign(3, 2))
	if err != nil {
		t.Fatal(err)
	}
	wantPart(t, im, 3, []int32{3, 2}, []int32{2, 3}, nil, nil)
}

func TestElectOne(t *testing.T) {
	im := testImage(1, 2)
	im.Topics["t"].Partitions[0].Leader = 2
	elect := func(typ int8) func(b *batch) error {
		return func(b *batch) error {
			t := b.tx.im.Topics["t"]
			return b.electOne(t, &t.Partitions[0], typ)
		}
	}
	got, err := step(t, im, elect(metadata.ElectPreferred))
	if err != nil || part0(got).Leader != 1 || part0(got).LeaderEpoch != 1 {
		t.Fatalf("preferred: %v %+v", err, part0(got))
	}
	if _, err := step(t, got, elect(metadata.ElectPreferred)); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("preferred again: %v", err)
	}
	if _, err := step(t, got, elect(metadata.ElectUnclean)); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("unclean with a leader: %v", err)
	}
	fenced := im.Clone()
	b1 := fenced.Brokers[1]
	b1.Fenced = true
	fenced.Brokers[1] = b1
	if _, err := step(t, fenced, elect(metadata.ElectPreferred)); !errors.Is(err, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("preferred fenced: %v", err)
	}
	// Unclean: the ISR {1} is dead, 2 is alive outside it.
	dead := fenced.Clone()
	p := &dead.Topics["t"].Partitions[0]
	p.Leader, p.ISR = noLeader, []int32{1}
	got, err = step(t, dead, elect(metadata.ElectUnclean))
	if err != nil || part0(got).Leader != 2 || !slices.Equal(part0(got).ISR, []int32{2}) || !part0(got).Recovering {
		t.Fatalf("unclean: %v %+v", err, part0(got))
	}
	// A live ISR member is preferred over an unclean choice.
	live := dead.Clone()
	live.Topics["t"].Partitions[0].ISR = []int32{1, 2}
	b1.Fenced = false
	live.Brokers[1] = b1
	got, err = step(t, live, elect(metadata.ElectUnclean))
	if err != nil || part0(got).Leader != 1 || part0(got).Recovering {
		t.Fatalf("unclean with a live ISR member: %v %+v", err, part0(got))
	}
	b2 := dead.Brokers[2]
	b2.Fenced = true
	dead.Brokers[2] = b2
	if _, err := step(t, dead, elect(metadata.ElectUnclean)); !errors.Is(err, kerr.EligibleLeadersNotAvailable) {
		t.Fatalf("unclean, nothing alive: %v", err)
	}
}

// Records written before reassignment existed (no "assign") keep the
// replica set; partitions without adding/removing decode as not
// reassigning.
func TestOldPartitionRecordsLoad(t *testing.T) {
	im := testImage(1, 2)
	var recs []record
	if err := json.Unmarshal([]byte(`[{"t":"PartitionChange","name":"t","part":{"index":0,"leader":2,"isr":[2]}}]`), &recs); err != nil {
		t.Fatal(err)
	}
	tx := newTxn(im)
	tx.apply(&recs[0], 5)
	wantPart(t, tx.im, 2, []int32{1, 2}, []int32{2}, nil, nil)
	var p metadata.Partition
	if err := json.Unmarshal([]byte(`{"index":0,"leader":1,"replicas":[1],"isr":[1]}`), &p); err != nil || p.Reassigning() {
		t.Fatalf("%v %+v", err, p)
	}
}

// The RPCs from a node that is not the active controller, over a real
// three-voter quorum: every node sees the committed result.
func TestElectAndReassignRPC(t *testing.T) {
	c := newCluster(t, 3, 0, nil)
	ctx := ctxT(t)
	n := c.follower()
	if err := n.CreateTopic(ctx, "r", -1, -1, [][]int32{{1, 2, 3}}, nil, false); err != nil {
		t.Fatal(err)
	}
	res, err := n.AlterPartitionReassignments(ctx, []metadata.Reassignment{
		{Topic: "r", Partition: 0, Replicas: []int32{3, 2}},
		{Topic: "r", Partition: 1, Replicas: []int32{1}},
	})
	if err != nil || res[0].Code != 0 || res[1].Code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%v %+v", err, res)
	}
	p := c.converged().Topics["r"].Partitions[0]
	if p.Leader != 3 || !slices.Equal(p.Replicas, []int32{3, 2}) || p.Reassigning() {
		t.Fatalf("after reassignment within the ISR: %+v", p)
	}
	// Adding 1 back cannot complete without the ISR growing (no broker
	// runs here to fetch): in progress, and 1 cannot be elected.
	if res, err = n.AlterPartitionReassignments(ctx, []metadata.Reassignment{{Topic: "r", Partition: 0, Replicas: []int32{1, 2, 3}}}); err != nil || res[0].Code != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	p = c.converged().Topics["r"].Partitions[0]
	if !slices.Equal(p.AddingReplicas, []int32{1}) || p.Leader != 3 {
		t.Fatalf("in progress: %+v", p)
	}
	res, err = n.ElectLeaders(ctx, metadata.ElectPreferred, []metadata.TopicPartition{{Topic: "r", Partition: 0}, {Topic: "x", Partition: 0}})
	if err != nil || res[0].Code != kerr.PreferredLeaderNotAvailable.Code || res[1].Code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%v %+v", err, res)
	}
	if res, err = n.AlterPartitionReassignments(ctx, []metadata.Reassignment{{Topic: "r", Partition: 0}}); err != nil || res[0].Code != 0 {
		t.Fatalf("cancel: %v %+v", err, res)
	}
	p = c.converged().Topics["r"].Partitions[0]
	if !slices.Equal(p.Replicas, []int32{2, 3}) || p.Reassigning() {
		t.Fatalf("cancelled: %+v", p)
	}
	// Every partition: ELECTION_NOT_NEEDED results are left out; 2 is the
	// preferred leader now and is elected.
	res, err = n.ElectLeaders(ctx, metadata.ElectPreferred, nil)
	if err != nil || len(res) != 1 || res[0].Code != 0 {
		t.Fatalf("elect all: %v %+v", err, res)
	}
	if p = c.converged().Topics["r"].Partitions[0]; p.Leader != 2 {
		t.Fatalf("after preferred election: %+v", p)
	}
}
