package replica

import (
	"testing"

	"github.com/sluice-io/sluice/internal/producer"
)

// A replica opened on a log whose transactions completed above the HW
// (LogState.Completed, from storage.Log.CompletedTxns) keeps them unstable
// until the HW passes their markers, as one that appended the markers
// itself does; one whose marker is below the HW is decided.
func TestCompletedAboveHWAfterRestart(t *testing.T) {
	r := New(Config{ID: 1, MinISR: 1, LagTimeMaxMs: 1000}, LogState{LEO: 10, HW: 4, Completed: []producer.Completed{
		{ProducerID: 6, FirstOffset: 1, LastOffset: 3},                // below the HW: stable
		{ProducerID: 5, FirstOffset: 2, LastOffset: 6, Aborted: true}, // above it
	}})
	if got := r.LastStable(); got != 2 {
		t.Fatalf("LSO after opening = %d, want 2 (producer 5's transaction, marker at 6 above the HW 4)", got)
	}
	r.Tick(10_000)
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	fetch(r, 2, 6)
	if r.HW() != 6 || r.LastStable() != 2 {
		t.Fatalf("HW %d LSO %d with the marker at the HW, want 6 and 2", r.HW(), r.LastStable())
	}
	fetch(r, 2, 7)
	if r.HW() != 7 || r.LastStable() != 7 {
		t.Fatalf("HW %d LSO %d with the marker below the HW, want 7 and 7", r.HW(), r.LastStable())
	}
}
