package broker_test

import (
	"net"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
)

// A broker in step mode never waits for lagging metadata: Partition and
// Leader of a partition it does not know answer at once, since nothing
// advances its manual clock while its stepper waits (the simulator's
// share handlers look partitions up this way).
func TestStepModeLookupDoesNotWait(t *testing.T) {
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
	b, err := broker.Open(broker.Options{Config: cfg, Controller: q.node(self), Steps: true, Clock: clock.NewManual(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.StepTick()
	done := make(chan error, 2)
	go func() {
		_, err := b.Partition("unknown", 0)
		done <- err
		_, err = b.Leader("unknown", 0)
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a partition of an unknown topic was found")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the lookup of an unknown partition waits on the manual clock")
		}
	}
}
