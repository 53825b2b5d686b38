package group

import (
	"testing"

	"github.com/sluice-io/sluice/internal/metadata"
)

// TestOffsetsReplicationFactor: __consumer_offsets is not created while a
// multi-node cluster is still registering its brokers (it used to be
// created with replication factor 1 when the first FindCoordinator reached
// a cluster where only one broker had registered, and stayed so).
func TestOffsetsReplicationFactor(t *testing.T) {
	brokers := func(active, fenced int) map[int32]metadata.Broker {
		m := map[int32]metadata.Broker{}
		for i := range active + fenced {
			m[int32(i+1)] = metadata.Broker{ID: int32(i + 1), Fenced: i >= active}
		}
		return m
	}
	for _, tc := range []struct {
		name           string
		configured     int16
		active, fenced int
		voters         int
		rf             int16
		ok             bool
	}{
		{"single node, no voters", 3, 1, 0, 0, 1, true},
		{"single node, itself the quorum", 3, 1, 0, 1, 1, true},
		{"3 voters, 1 registered", 3, 1, 0, 3, 3, false},
		{"3 voters, 2 active 1 fenced", 3, 2, 1, 3, 3, false},
		{"3 voters, 3 active", 3, 3, 0, 3, 3, true},
		{"3 voters, rf 1", 1, 1, 0, 3, 1, true},
		{"5 brokers, 3 voters", 3, 5, 0, 3, 3, true},
		{"2 brokers, no voters known, rf 3", 3, 2, 0, 0, 2, true},
		{"nothing registered", 3, 0, 0, 0, 1, false},
	} {
		rf, ok := offsetsReplicationFactor(tc.configured, brokers(tc.active, tc.fenced), tc.voters)
		if rf != tc.rf || ok != tc.ok {
			t.Errorf("%s: got rf %d ok %v, want rf %d ok %v", tc.name, rf, ok, tc.rf, tc.ok)
		}
	}
}
