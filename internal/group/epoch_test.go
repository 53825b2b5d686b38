package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/clock"
)

// TestNewerLeaderEpochReloadsShard: a leadership change at a newer leader
// epoch (this node led, another did, this one again) reloads the group
// shard, as the transaction coordinator's: the in-memory state of the old
// leadership goes, and a request waiting on it is answered NOT_COORDINATOR
// rather than served from stale state. (The group coordinator used to keep
// a shard it already had whatever the epoch.)
func TestNewerLeaderEpochReloadsShard(t *testing.T) {
	clk := clock.NewManual(time.Unix(2_000_000, 0))
	b := openBroker(t, t.TempDir())
	c := testCoordinator(t, b, clk)
	req := jr("", time.Second, time.Second)
	req.Group = "g"
	res := c.JoinGroup(req, "client", "/127.0.0.1")
	if res.Wait == nil {
		t.Fatalf("join answered at once: %+v", res.Resp)
	}
	i := PartitionFor("g", 3)
	p, err := b.Partition(OffsetsTopic, i)
	if err != nil {
		t.Fatal(err)
	}
	c.ElectAt(i, p.LeaderEpoch()+1)
	got := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { got <- res.Wait() }()
	select {
	case r := <-got:
		if r.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("waiting join after the reload: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the join still waits on the shard of the older leader epoch")
	}
	// A stale election (an older epoch than the shard's) changes nothing.
	info, _ := c.rt.Info(i)
	c.ElectAt(i, info.Epoch-1)
	if now, _ := c.rt.Info(i); now != info {
		t.Fatalf("a stale ElectAt replaced the shard: %+v -> %+v", info, now)
	}
}
