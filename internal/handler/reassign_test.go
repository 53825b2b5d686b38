package handler_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// On a single node (metadata.Local) every partition already has its only
// possible leader and replica set; ElectLeaders and the reassignment APIs
// are served with Kafka's answers for that.
func TestElectAndReassignSingleNode(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopics(ctx(t), 2, 1, nil, "e"); err != nil {
		t.Fatal(err)
	}
	set := kadm.TopicsSet{}
	set.Add("e", 0, 1, 5)
	for _, how := range []kadm.ElectLeadersHow{kadm.ElectPreferredReplica, kadm.ElectLiveReplica} {
		res, err := adm.ElectLeaders(ctx(t), how, set)
		if err != nil {
			t.Fatal(err)
		}
		for p, want := range map[int32]error{0: kerr.ElectionNotNeeded, 1: kerr.ElectionNotNeeded, 5: kerr.UnknownTopicOrPartition} {
			if got := res["e"][p].Err; !errors.Is(got, want) {
				t.Errorf("election %v of e-%d: %v, want %v", how, p, got, want)
			}
		}
	}
	// Null topics: every partition, without those needing no election.
	all := request[*kmsg.ElectLeadersResponse](t, cl, kmsg.NewPtrElectLeadersRequest())
	if all.ErrorCode != 0 || len(all.Topics) != 0 {
		t.Fatalf("elect all: %+v", all)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("e", 0, []int32{n.b.Config().NodeID})
	req.Assign("e", 1, []int32{42})
	req.CancelAssign("nope", 0)
	resps, err := adm.AlterPartitionAssignments(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if e := resps["e"][0].Err; e != nil {
		t.Errorf("reassign to the node itself: %v", e)
	}
	if e := resps["e"][1].Err; !errors.Is(e, kerr.InvalidReplicaAssignment) {
		t.Errorf("reassign to an unknown broker: %v", e)
	}
	if e := resps["nope"][0].Err; !errors.Is(e, kerr.UnknownTopicOrPartition) {
		t.Errorf("cancel on an unknown topic: %v", e)
	}
	list := request[*kmsg.ListPartitionReassignmentsResponse](t, cl, kmsg.NewPtrListPartitionReassignmentsRequest())
	if list.ErrorCode != 0 || len(list.Topics) != 0 {
		t.Fatalf("list: %+v", list)
	}
}
