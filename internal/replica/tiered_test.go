package replica

import (
	"reflect"
	"testing"

	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
)

// TestRemoteAux: a follower below the leader's local log start restarts
// its log there from the remote segment's epochs and producers, keeping
// the leader's log start below it (KIP-405, buildRemoteLogAuxState); a
// stale or useless aux changes nothing.
func TestRemoteAux(t *testing.T) {
	f := follower2(t, 3, []int32{1, 1})
	req, _ := f.FetchRequest()
	// OFFSET_MOVED_TO_TIERED_STORAGE alone changes nothing: the driver
	// gathers the aux state.
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{Error: ErrOffsetMovedToTieredStorage, LogStart: 0}})
	if f.LEO() != 2 || f.HasReady() {
		t.Fatalf("error alone moved the follower: %s", f)
	}
	ps := producer.NewState()
	ps.Update(7, 0, producer.Batch{FirstSeq: 0, LastSeq: 4, FirstOffset: 90, LastOffset: 94})
	aux := RemoteAux{LocalStart: 100, LogStart: 10,
		Epochs: []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 60}, {Epoch: 3, StartOffset: 100}}, Producers: ps}
	stale := req
	stale.CurrentLeaderEpoch--
	if f.HandleRemoteAux(stale, aux) {
		t.Fatal("aux for another leader epoch applied")
	}
	useless := aux
	useless.LocalStart = 2
	if f.HandleRemoteAux(req, useless) {
		t.Fatal("aux not past the log end applied")
	}
	bad := aux
	bad.LogStart = 101
	if f.HandleRemoteAux(req, bad) {
		t.Fatal("aux with the log start above the local start applied")
	}
	if !f.HandleRemoteAux(req, aux) {
		t.Fatal("aux refused")
	}
	rd := f.Ready()
	if tr := rd.Truncate; tr == nil || !tr.Fully || !tr.Tiered || tr.Offset != 100 || tr.LogStart != 10 {
		t.Fatalf("truncation %+v", rd.Truncate)
	}
	if f.LEO() != 100 || f.LogStart() != 10 || f.HW() != 100 || f.FlushedOffset() != 100 {
		t.Fatalf("after aux: %s", f)
	}
	if want := []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 60}}; !reflect.DeepEqual(rd.Epochs, want) {
		t.Fatalf("epochs %v, want %v", rd.Epochs, want)
	}
	if e := f.Producers().Get(7); e == nil {
		t.Fatal("producer 7 lost")
	}
	f.Advance()
	next, ok := f.FetchRequest()
	if !ok || next.FetchOffset != 100 || next.LastFetchedEpoch != 2 || next.LogStartOffset != 10 {
		t.Fatalf("next fetch %+v %v", next, ok)
	}
	// The old request is stale now.
	if f.HandleRemoteAux(req, RemoteAux{LocalStart: 200, LogStart: 10}) {
		t.Fatal("aux for an old fetch applied")
	}
}
