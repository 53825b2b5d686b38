package replica

import (
	"reflect"
	"testing"
)

// TestDeleteRecords: the machine raises the log start at once and answers
// a DeleteRecords only once every live replica reported a log start at
// or above its offset; it fails one past its deadline with
// REQUEST_TIMED_OUT, every waiting one with NOT_LEADER_OR_FOLLOWER when
// leadership goes, and refuses one above the HW at once.
func TestDeleteRecords(t *testing.T) {
	fetch := func(r *Replica, id int32, logStart int64) {
		r.HandleFetch(FetchRequest{ReplicaID: id, BrokerEpoch: -1, CurrentLeaderEpoch: 1, FetchOffset: 10, LastFetchedEpoch: 1, LogStartOffset: logStart})
	}
	deleted := func(r *Replica) []DeleteRecordsResult {
		defer r.Advance()
		return append([]DeleteRecordsResult(nil), r.Ready().Deleted...)
	}
	r := newLeader(t, 1, []int32{1, 2, 3}, 1, 10)
	fetch(r, 2, 0)
	fetch(r, 3, 0)
	r.Advance()

	r.DeleteRecords(DeleteRecordsRequest{ID: 1, Offset: 11, DeadlineMs: 15_000})
	if got, want := deleted(r), []DeleteRecordsResult{{ID: 1, LowWatermark: -1, Error: ErrOffsetOutOfRange}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("above the HW: %+v, want %+v", got, want)
	}
	r.DeleteRecords(DeleteRecordsRequest{ID: 2, Offset: 4, DeadlineMs: 15_000})
	if rd := r.Ready(); rd.LogStart != 4 || !rd.LogStartSet || len(rd.Deleted) != 0 {
		t.Fatalf("the log start moves at once, the answer waits: %+v", rd)
	}
	r.Advance()
	fetch(r, 2, 4)
	if got := deleted(r); len(got) != 0 {
		t.Fatalf("answered with follower 3 still at 0: %+v", got)
	}
	fetch(r, 3, 4)
	if got, want := deleted(r), []DeleteRecordsResult{{ID: 2, LowWatermark: 4}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("every replica at 4: %+v, want %+v", got, want)
	}

	r.DeleteRecords(DeleteRecordsRequest{ID: 3, Offset: 6, DeadlineMs: 15_000})
	r.Advance()
	r.Tick(14_999)
	if got := deleted(r); len(got) != 0 {
		t.Fatalf("answered before the deadline: %+v", got)
	}
	r.Tick(15_000)
	if got, want := deleted(r), []DeleteRecordsResult{{ID: 3, LowWatermark: -1, Error: ErrRequestTimedOut}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("at the deadline: %+v, want %+v", got, want)
	}

	r.DeleteRecords(DeleteRecordsRequest{ID: 4, Offset: 7, DeadlineMs: 50_000})
	r.Advance()
	r.ApplyMetadata(PartitionState{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}})
	if got, want := deleted(r), []DeleteRecordsResult{{ID: 4, LowWatermark: -1, Error: ErrNotLeaderOrFollower}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("leadership lost: %+v, want %+v", got, want)
	}
	r.DeleteRecords(DeleteRecordsRequest{ID: 5, Offset: 7, DeadlineMs: 50_000})
	if got, want := deleted(r), []DeleteRecordsResult{{ID: 5, LowWatermark: -1, Error: ErrNotLeaderOrFollower}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("on a follower: %+v, want %+v", got, want)
	}
}

// TestDeleteRecordsEarlyKnob: Config.AnswerDeleteRecordsEarly puts back
// the answer at the leader's own log start, for the simulator's tests.
func TestDeleteRecordsEarlyKnob(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2}, 1, 10)
	r.cfg.AnswerDeleteRecordsEarly = true
	r.HandleFetch(FetchRequest{ReplicaID: 2, BrokerEpoch: -1, CurrentLeaderEpoch: 1, FetchOffset: 10, LastFetchedEpoch: 1})
	r.Advance()
	r.DeleteRecords(DeleteRecordsRequest{ID: 1, Offset: 4, DeadlineMs: 15_000})
	if rd := r.Ready(); len(rd.Deleted) != 1 || rd.Deleted[0].Error != ErrNone {
		t.Fatalf("with the knob, answered at once: %+v", rd.Deleted)
	}
}

// TestDeleteRecordsWaitsForELR: a fenced replica in the ELR (KIP-966) may
// be elected, so a DeleteRecords waits for its log start as for a live
// replica's; once it leaves the ELR it no longer holds the answer back.
func TestDeleteRecordsWaitsForELR(t *testing.T) {
	fetch := func(r *Replica, id int32, logStart int64) {
		r.HandleFetch(FetchRequest{ReplicaID: id, BrokerEpoch: -1, CurrentLeaderEpoch: 1, FetchOffset: 10, LastFetchedEpoch: 1, LogStartOffset: logStart})
	}
	deleted := func(r *Replica) []DeleteRecordsResult {
		defer r.Advance()
		return append([]DeleteRecordsResult(nil), r.Ready().Deleted...)
	}
	r := newLeader(t, 2, []int32{1, 2, 3}, 1, 10)
	fetch(r, 2, 0)
	fetch(r, 3, 0)
	r.Advance()
	// 3 is fenced and in the ELR.
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Ineligible: []int32{3}, ELR: []int32{3}})
	r.Advance()
	r.DeleteRecords(DeleteRecordsRequest{ID: 1, Offset: 4, DeadlineMs: 15_000})
	r.Advance()
	fetch(r, 2, 4)
	if got := deleted(r); len(got) != 0 {
		t.Fatalf("answered with ELR member 3 still at 0: %+v", got)
	}
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Ineligible: []int32{3}})
	if got, want := deleted(r), []DeleteRecordsResult{{ID: 1, LowWatermark: 4}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("3 out of the ELR: %+v, want %+v", got, want)
	}
}
