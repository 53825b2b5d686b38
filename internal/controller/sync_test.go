package controller

import (
	"strconv"
	"testing"

	"github.com/sluice-io/sluice/internal/metadata"
)

// TestSyncMetadataIsAReadBarrier: after SyncMetadata, a voter that follows
// and a broker-only node both show every change the active controller
// committed before the call, although they apply it later than the
// active one does.
func TestSyncMetadataIsAReadBarrier(t *testing.T) {
	c := newCluster(t, 3, 1, nil)
	act := c.active()
	others := []*Node{c.follower(), c.nodes[4]}
	for i := 0; i < 20; i++ {
		op := metadata.ConfigOp{Name: "share.auto.offset.reset", Value: "earliest"}
		group := "g" + strconv.Itoa(i)
		if err := act.AlterResourceConfigs(ctxT(t), metadata.ConfigResource{Type: metadata.ResourceGroup, Name: group}, []metadata.ConfigOp{op}, false, false); err != nil {
			t.Fatal(err)
		}
		want := act.Image().Offset
		for _, n := range others {
			if err := n.SyncMetadata(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			im := n.Image()
			if im.Offset < want || im.GroupConfigs[group]["share.auto.offset.reset"] != "earliest" {
				t.Fatalf("node %d after SyncMetadata: offset %d, active's %d, group config %v", c.id(n), im.Offset, want, im.GroupConfigs[group])
			}
		}
	}
}
