package status

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
)

// openTestBroker opens a single-node broker on a temporary data dir,
// closed when the test ends.
func openTestBroker(t *testing.T) *broker.Broker { return openTestBrokerClock(t, nil) }

// nowClock reads the time from now and keeps the real clock's timers.
type nowClock struct {
	clock.Clock
	now func() time.Time
}

func (c nowClock) Now() time.Time { return c.now() }

// openTestBrokerClock is openTestBroker with a clock (nil: time.Now).
func openTestBrokerClock(t *testing.T, now func() time.Time) *broker.Broker {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:1"
	var clk clock.Clock
	if now != nil {
		clk = nowClock{clock.Real, now}
	}
	b, err := broker.Open(broker.Options{Config: cfg, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
