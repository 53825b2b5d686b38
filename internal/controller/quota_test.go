package controller

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// Client quotas are written through the active controller from any node,
// checked per entry, applied on every node, and survive a snapshot and a
// full restart.
func TestQuorumClientQuotas(t *testing.T) {
	cl := newClusterSnap(t, 8)
	e := metadata.QuotaEntity{ClientID: metadata.QuotaName{Set: true, Name: "c1"}}
	errs, err := cl.follower().AlterClientQuotas(ctxT(t), []metadata.QuotaAlteration{
		{Entity: e, Ops: []metadata.QuotaOp{{Key: metadata.QuotaProducerByteRate, Value: 1000}}},
		{Entity: e, Ops: []metadata.QuotaOp{{Key: "bogus", Value: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], kerr.InvalidRequest) {
		t.Fatalf("per-entry errors %v, want [nil INVALID_REQUEST]", errs)
	}
	if v, ok := cl.converged().QuotaOf(e, metadata.QuotaProducerByteRate); !ok || v != 1000 {
		t.Fatalf("stored quota %v %v", v, ok)
	}
	for i := 0; i < 10; i++ {
		if err := cl.active().CreateTopic(ctxT(t), "s"+string(rune('a'+i)), 1, 1, nil, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	for id, n := range cl.nodes {
		if err := n.Snapshot(); err != nil {
			t.Fatalf("snapshot on %d: %v", id, err)
		}
	}
	cl.closeAll()
	for _, v := range cl.voters {
		cl.start(v.ID)
	}
	cl.waitReady()
	if v, ok := cl.converged().QuotaOf(e, metadata.QuotaProducerByteRate); !ok || v != 1000 {
		t.Fatalf("after restart: %v %v", v, ok)
	}
}
