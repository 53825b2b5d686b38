package status

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
)

// openTestBroker opens a single-node broker on a temporary data dir,
// closed when the test ends.
func openTestBroker(t *testing.T) *broker.Broker { return openTestBrokerClock(t, nil) }

// openTestBrokerClock is openTestBroker with a clock (nil: time.Now).
func openTestBrokerClock(t *testing.T, now func() time.Time) *broker.Broker {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:1"
	b, err := broker.Open(broker.Options{Config: cfg, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
