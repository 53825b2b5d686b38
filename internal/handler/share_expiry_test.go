package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/share"
)

// expireLocks moves clk past the share locks (1 s) in small steps,
// giving the handlers' expiry sweep time to run after each, until the
// durable state of key holds every offset of offs with delivery count
// want, or a few seconds pass.
func expireLocks(t *testing.T, n *node, clk *clock.Manual, key share.Key, want int16, offs ...int64) {
	t.Helper()
	durable := func() bool {
		st, err := n.h.SharePartitions().Persister().Read(context.Background(), key, 0)
		if err != nil {
			return false
		}
		for _, o := range offs {
			ok := false
			for _, b := range st.Batches {
				ok = ok || b.FirstOffset <= o && o <= b.LastOffset && b.DeliveryCount == want
			}
			if !ok {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if i < 12 {
			clk.Advance(100 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		if i >= 10 && durable() {
			return
		}
	}
}

// TestShareLockExpiryPersisted: an acquisition lock that passes with no
// fetch coming is written to the share coordinator (Kafka's
// SharePartition.releaseAcquisitionLockOnTimeout), so a broker that
// loads the state again (here a restart; a new leader alike) goes on
// from the delivery counts reached instead of starting them again, and a
// record archived at share.delivery.count.limit on expiry stays archived.
func TestShareLockExpiryPersisted(t *testing.T) {
	props := map[string]string{"group.share.delivery.count.limit": "3"}
	for k, v := range sharePartProps {
		props[k] = v
	}
	dir := t.TempDir()
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, dir, props, clk)
	sharePartTopic(t, n, "q", 2)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	id, _ := n.b.TopicID("q")
	key := share.Key{Group: "sg", TopicID: id, Partition: 0}

	// 0 and 1 delivered once; the lock passes with no fetch.
	if got := acquiredOf(t, newShareMember(t, n, "sg", "q").fetch(0)); len(got) != 2 || got[0] != 1 || got[1] != 1 {
		t.Fatalf("first delivery %v", got)
	}
	expireLocks(t, n, clk, key, 1, 0, 1)
	// 0 delivered again; its lock passes too.
	if got := acquiredOf(t, newShareMember(t, n, "sg", "q").fetch(1)); len(got) != 1 || got[0] != 2 {
		t.Fatalf("second delivery %v", got)
	}
	expireLocks(t, n, clk, key, 2, 0)
	n.stop()

	clk = clock.NewManual(time.Now())
	n = startNodeClock(t, dir, props, clk)
	got := acquiredOf(t, newShareMember(t, n, "sg", "q").fetch(0))
	if len(got) != 2 || got[0] != 3 || got[1] != 2 {
		t.Fatalf("after a restart, delivered %v (offset: delivery count); want 0 with count 3 and 1 with count 2", got)
	}
	// 0 reached the limit: its lock passing archives it.
	expireLocks(t, n, clk, key, 3, 0)
	n.stop()

	clk = clock.NewManual(time.Now())
	n = startNodeClock(t, dir, props, clk)
	got = acquiredOf(t, newShareMember(t, n, "sg", "q").fetch(0))
	if len(got) != 1 || got[1] != 3 {
		t.Fatalf("after the archive on expiry and a restart, delivered %v; want only 1, with count 3", got)
	}
}
