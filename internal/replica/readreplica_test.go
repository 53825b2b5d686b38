package replica

import (
	"slices"
	"testing"
)

// TestFollowerServesConsumers: a follower answers a consumer only when it
// sent client metadata (KIP-392), up to the follower's own HW, with the
// leader's epoch fencing and range checks.
func TestFollowerServesConsumers(t *testing.T) {
	r := follower2(t, 1, []int32{1, 1, 1})
	req := FetchRequest{ReplicaID: -1, CurrentLeaderEpoch: 1, FetchOffset: 0, LastFetchedEpoch: -1}
	if res := r.HandleFetch(req); res.Error != ErrNotLeaderOrFollower {
		t.Fatalf("without client metadata: %+v", res)
	}
	req.AnyReplica = true
	if res := r.HandleFetch(req); res.Error != ErrNone || res.To != r.HW() || r.HW() != 0 {
		t.Fatalf("HW 0: %+v (HW %d)", res, r.HW())
	}
	fr, ok := r.FetchRequest()
	if !ok {
		t.Fatal("no fetch to send")
	}
	r.HandleFetchResponse(FetchResponse{Request: fr, FetchResult: FetchResult{HW: 2, LogStart: 0, LEO: 3, From: fr.FetchOffset, To: fr.FetchOffset}})
	if r.HW() != 2 {
		t.Fatalf("follower HW %d after the leader's 2", r.HW())
	}
	if res := r.HandleFetch(req); res.Error != ErrNone || res.From != 0 || res.To != 2 {
		t.Fatalf("HW 2: %+v", res)
	}
	for _, c := range []struct {
		epoch int32
		off   int64
		want  int16
	}{{0, 0, ErrFencedLeaderEpoch}, {2, 0, ErrUnknownLeaderEpoch}, {1, 4, ErrOffsetOutOfRange}, {-1, 3, ErrNone}} {
		req.CurrentLeaderEpoch, req.FetchOffset = c.epoch, c.off
		if res := r.HandleFetch(req); res.Error != c.want {
			t.Errorf("epoch %d offset %d: %+v, want error %d", c.epoch, c.off, res, c.want)
		}
	}
	// A follower's fetch is still the leader's alone.
	if res := r.HandleFetch(FetchRequest{ReplicaID: 3, CurrentLeaderEpoch: 1, AnyReplica: true, LastFetchedEpoch: -1}); res.Error != ErrNotLeaderOrFollower {
		t.Fatalf("a replica's fetch on a follower: %+v", res)
	}
}

// TestReadReplicas: the leader offers a consumer only in-sync followers
// whose log holds the fetch offset.
func TestReadReplicas(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2}, 1, 10)
	fetch(r, 2, 10)
	fetch(r, 3, 10) // caught up but not (yet) in the committed ISR
	ids := func(off int64) []int32 {
		var out []int32
		for _, c := range r.ReadReplicas(off) {
			out = append(out, c.ID)
		}
		return out
	}
	if got := ids(5); !slices.Equal(got, []int32{2}) {
		t.Fatalf("offset 5: %v, want [2]", got)
	}
	if got := ids(11); len(got) != 0 {
		t.Fatalf("offset 11, past every follower's log: %v", got)
	}
	if got := follower2(t, 1, []int32{1}).ReadReplicas(0); got != nil {
		t.Fatalf("on a follower: %v", got)
	}
}
