package broker

import (
	"testing"

	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/remote"
)

// TestHighestCopied: the highest offset copied in a replica's epoch
// lineage (Kafka's findHighestRemoteOffset) is the newest epoch the
// remote log has, capped at that epoch's end in the replica's own log.
func TestHighestCopied(t *testing.T) {
	var c remote.Cache
	rp := remote.Partition{TopicID: [16]byte{1}, Topic: "t"}
	add := func(start, end int64, es ...epoch.Entry) {
		s := remote.Segment{Partition: rp, ID: [16]byte{byte(start)}, StartOffset: start, EndOffset: end, LeaderEpochs: es, State: remote.CopyStarted}
		if err := c.AddCopyStarted(s); err != nil {
			t.Fatal(err)
		}
		if err := c.UpdateState(remote.Update{Partition: rp, ID: s.ID, State: remote.CopyFinished}); err != nil {
			t.Fatal(err)
		}
	}
	if got := highestCopied(&c, rp, []epoch.Entry{{Epoch: 0, StartOffset: 0}}, 100); got != -1 {
		t.Fatalf("nothing copied: %d", got)
	}
	add(0, 99, epoch.Entry{Epoch: 0, StartOffset: 0})
	add(100, 289, epoch.Entry{Epoch: 0, StartOffset: 100}, epoch.Entry{Epoch: 2, StartOffset: 200})
	for _, c2 := range []struct {
		es   []epoch.Entry
		leo  int64
		want int64
	}{
		// A follower of the same lineage that now leads in epoch 3.
		{[]epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 200}, {Epoch: 3, StartOffset: 330}}, 530, 289},
		// The replica's epoch 2 ended before what was copied of it.
		{[]epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 200}, {Epoch: 3, StartOffset: 250}}, 530, 249},
		// A lineage without epoch 2: its epoch 0 ended at 149.
		{[]epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 150}}, 400, 149},
	} {
		if got := highestCopied(&c, rp, c2.es, c2.leo); got != c2.want {
			t.Errorf("epochs %v: %d, want %d", c2.es, got, c2.want)
		}
	}
}
