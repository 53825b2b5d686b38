package replica

import (
	"slices"
	"testing"

	"github.com/sluice-io/sluice/internal/epoch"
)

// A leader elected from the ELR (KIP-966) with the ISR of itself alone,
// below min ISR, keeps the HW it had, however stale (a restart starts it
// from the checkpoint): as Kafka's Partition.maybeIncrementLeaderHW
// returns while isUnderMinIsr, its own LEO is no proof that a record is
// committed. The HW moves the moment the ISR is back at min ISR: when the
// controller commits the expansion a caught-up follower's fetch proposed,
// with no further fetch or tick.
func TestELRLeaderHWWaitsForMinISR(t *testing.T) {
	c := &epoch.Cache{}
	c.Assign(1, 0)
	r := New(Config{ID: 1, MinISR: 2, LagTimeMaxMs: 1000}, LogState{LEO: 10, HW: 4, Epochs: c})
	r.Tick(10_000)
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, ELR: []int32{2}})
	r.Advance()
	if r.HW() != 4 {
		t.Fatalf("HW %d after the election, want the 4 it had", r.HW())
	}
	res := r.HandleFetch(FetchRequest{ReplicaID: 2, BrokerEpoch: -1, CurrentLeaderEpoch: 2, FetchOffset: 10, LastFetchedEpoch: 1})
	if res.Error != ErrNone || res.Diverging != nil {
		t.Fatalf("fetch: %+v", res)
	}
	prop := r.Ready().ISRProposal
	if prop == nil || !slices.Equal(prop.NewISR, []int32{1, 2}) {
		t.Fatalf("proposal %+v, want ISR [1 2]", prop)
	}
	r.Advance()
	if r.HW() != 4 {
		t.Fatalf("HW %d with the expansion in flight, want 4 (the committed ISR is below min ISR)", r.HW())
	}
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 6, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	if r.HW() != 10 {
		t.Fatalf("HW %d once the ISR [1 2] is committed, want 10", r.HW())
	}
}
