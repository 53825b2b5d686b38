package controller

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// UnregisterBroker over a real three-voter quorum, sent by a follower:
// refused while the broker is active and while it is a replica, accepted
// once it is stopped and its replicas moved; the id registers again.
func TestUnregisterBroker(t *testing.T) {
	c := newCluster(t, 3, 1, nil)
	ctx := ctxT(t)
	n := c.follower()
	if err := n.CreateTopic(ctx, "u", -1, -1, [][]int32{{1, 2, 4}}, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := n.UnregisterBroker(ctx, 9); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("unknown id: %v", err)
	}
	if err := n.UnregisterBroker(ctx, 4); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("active broker: %v", err)
	}
	c.stop(4)
	waitFor(t, 10*time.Second, "broker 4 fenced or shut down", func() bool {
		b, ok := c.active().Image().Brokers[4]
		return ok && !b.Active()
	})
	err := n.UnregisterBroker(ctx, 4)
	if !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), "u-0") {
		t.Fatalf("broker 4 still a replica: %v", err)
	}
	// 4 left the ISR when it stopped: a target of {1,2} completes at once.
	res, err := n.AlterPartitionReassignments(ctx, []metadata.Reassignment{{Topic: "u", Partition: 0, Replicas: []int32{1, 2}}})
	if err != nil || res[0].Code != 0 {
		t.Fatalf("reassign: %v %+v", err, res)
	}
	if err := n.UnregisterBroker(ctx, 4); err != nil {
		t.Fatalf("unregister: %v", err)
	}
	im := c.converged()
	if _, ok := im.Brokers[4]; ok {
		t.Fatalf("broker 4 still registered: %+v", im.Brokers)
	}
	if err := n.UnregisterBroker(ctx, 4); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("second unregister: %v", err)
	}
	// A new broker 4 (empty data directory) registers afresh and is
	// unfenced; the controller keeps fencing and placing as before.
	if err := os.RemoveAll(c.dirs[4]); err != nil {
		t.Fatal(err)
	}
	c.start(4)
	c.waitReady()
	waitFor(t, 10*time.Second, "broker 4 registered and active everywhere", func() bool {
		for _, node := range c.nodes {
			if b, ok := node.Image().Brokers[4]; !ok || !b.Active() {
				return false
			}
		}
		return true
	})
	if err := n.CreateTopic(ctx, "v", -1, -1, [][]int32{{4, 1}}, nil, false); err != nil {
		t.Fatalf("a topic on the new broker 4: %v", err)
	}
}
