package broker

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// Dynamic broker configs reach what the broker keeps from its settings:
// the replication throttle rates and the cleaner's threads, backoff and
// rate change at once, and go back when the dynamic values are removed.
func TestDynamicConfigApplied(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:19093"
	b, err := Open(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	def := metadata.ConfigResource{Type: metadata.ResourceBroker}
	self := metadata.ConfigResource{Type: metadata.ResourceBroker, Name: "1"}
	set := func(r metadata.ConfigResource, kv ...string) {
		t.Helper()
		var ops []ConfigOp
		for i := 0; i < len(kv); i += 2 {
			ops = append(ops, ConfigOp{Name: kv[i], Value: kv[i+1]})
		}
		if err := b.AlterResourceConfigs(r, ops, true, false); err != nil {
			t.Fatal(err)
		}
	}
	c := b.cleaner.Load()
	alive := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.alive)
	}
	waitAlive := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for alive() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d cleaner threads alive, want %d", alive(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if b.leaderQuota.limit() != 0 || alive() != 1 {
		t.Fatalf("at start: leader rate %v, %d cleaner threads", b.leaderQuota.limit(), alive())
	}
	set(def, "leader.replication.throttled.rate", "1000", "follower.replication.throttled.rate", "3000",
		"log.cleaner.threads", "3", "log.cleaner.backoff.ms", "10", "log.cleaner.io.max.bytes.per.second", "5000")
	set(self, "leader.replication.throttled.rate", "2000")
	if l, f := b.leaderQuota.limit(), b.followerQuota.limit(); l != 2000 || f != 3000 {
		t.Errorf("throttle rates %v %v, want the broker's 2000 and the default's 3000", l, f)
	}
	waitAlive(3)
	c.throttle.mu.Lock()
	rate := c.throttle.rate
	c.throttle.mu.Unlock()
	if rate != 5000 {
		t.Errorf("cleaner I/O rate %v", rate)
	}
	set(def, "log.cleaner.threads", "1", "log.cleaner.backoff.ms", "10")
	waitAlive(1)
	set(self)
	set(def)
	if l, f := b.leaderQuota.limit(), b.followerQuota.limit(); l != 0 || f != 0 {
		t.Errorf("throttle rates after removal %v %v", l, f)
	}
}
