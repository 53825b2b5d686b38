package broker_test

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// restartingNode is a controller handle for a broker incarnation that has
// not registered yet: while its metadata log is being replayed, BrokerEpoch
// is -1 and the images it sees are history.
type restartingNode struct {
	*fakeNode
	epoch atomic.Int64
}

func (n *restartingNode) BrokerEpoch() int64 { return n.epoch.Load() }

// A restarting broker must not act on replayed metadata: an old image can
// name it leader of an epoch that has long ended (the chaos harness caught
// a restarted node serving its stale, divergent log as "leader" while its
// metadata log replayed).
func TestReplayedMetadataIsNotActedOn(t *testing.T) {
	q := newFakeQuorum()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := config.Defaults()
	cfg.NodeID = 1
	cfg.DataDir = t.TempDir()
	cfg.Listen = ln.Addr().String()
	self, _ := broker.SelfBroker(cfg)
	fn := q.node(self) // the previous incarnation's registration
	if err := fn.CreateTopic(nil, "old", 1, 1, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	n := &restartingNode{fakeNode: fn}
	n.epoch.Store(-1)
	// Step mode on a manual clock: the fake quorum delivers each image on
	// this goroutine, so when update returns the broker has applied it (or
	// decided not to); nothing needs a sleep.
	b, err := broker.Open(broker.Options{Config: cfg, Controller: n, Steps: true, Clock: clock.NewManual(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Time{} // look partitions up without waiting for metadata
	// History says this node leads "old"; it has not registered yet.
	q.update(func(im *metadata.Image) error { return nil })
	b.StepTick()
	if p, err := b.PartitionBy("old", 0, now); err == nil && p.IsLeader() {
		t.Fatal("acted as leader on replayed metadata before registering")
	}
	// Nor may it deny that a topic exists: its image is history.
	if b.CaughtUp() {
		t.Fatal("caught up before its registration is in the image")
	}
	if _, err := b.LeaderBy("created-since", 0, now); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("unknown topic before catching up: %v, want NOT_LEADER_OR_FOLLOWER (retriable)", err)
	}
	// The new incarnation registers: from now on metadata is current.
	q.update(func(im *metadata.Image) error {
		br := im.Brokers[1]
		br.Epoch = im.Offset + 1
		im.Brokers[1] = br
		n.epoch.Store(br.Epoch)
		return nil
	})
	if p, err := b.PartitionBy("old", 0, now); err != nil || !p.IsLeader() {
		t.Fatalf("did not act on current metadata after registering: %v", err)
	}
	if _, err := b.LeaderBy("created-since", 0, now); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic once caught up: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
