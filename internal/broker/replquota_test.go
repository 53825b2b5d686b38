package broker

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
)

// TestReplQuotaRate drives the replication quota as a leader serving a
// throttled follower would: a chunk whenever the rate is not exceeded.
// The bytes let through over 20 s must be the bound's, the first second
// included (no burst of n-1 windows on an idle quota).
func TestReplQuotaRate(t *testing.T) {
	cfg := config.Defaults()
	cfg.Props["leader.replication.throttled.rate"] = "1000000"
	c := clock.NewManual(time.Unix(1000, 0))
	q := newReplQuota(cfg, c, "leader", "leader.replication.throttled.rate")
	if !q.enabled() || q.n != 11 || q.window != time.Second {
		t.Fatalf("quota %+v", q)
	}
	const chunk = 64 << 10
	var sent, firstSecond int64
	for i := 0; i < 2000; i++ { // 20 s in 10 ms steps
		if !q.exceeded() {
			q.record(chunk)
			sent += chunk
		}
		if i == 99 {
			firstSecond = sent
		}
		c.Advance(10 * time.Millisecond)
	}
	if firstSecond > 1000000+2*chunk {
		t.Errorf("first second let %d bytes through, bound 1000000", firstSecond)
	}
	if got := float64(sent) / 20; got < 0.95e6 || got > 1.1e6 {
		t.Errorf("rate %.0f B/s, bound 1000000", got)
	}

	unlimited := newReplQuota(config.Defaults(), c, "leader", "leader.replication.throttled.rate")
	unlimited.record(1 << 40)
	if unlimited.enabled() || unlimited.exceeded() {
		t.Error("the default rate (Long.MAX) throttles")
	}
}

func TestThrottledList(t *testing.T) {
	q := &replQuota{}
	for _, c := range []struct {
		v       string
		p, b    int32
		matches bool
	}{
		{"", 0, 1, false},
		{"*", 3, 7, true},
		{"0:1,1:2", 0, 1, true},
		{"0:1, 1:2", 1, 2, true},
		{"0:1,1:2", 1, 1, false},
		{"0:1,1:2", 0, 2, false},
	} {
		if got := q.throttles(c.v, c.p, c.b); got != c.matches {
			t.Errorf("%q names %d:%d: %v", c.v, c.p, c.b, got)
		}
	}
}

// TestReplQuotaDelay checks that delay names the moment the rate is back
// at the bound.
func TestReplQuotaDelay(t *testing.T) {
	cfg := config.Defaults()
	cfg.Props["follower.replication.throttled.rate"] = "1000000"
	c := clock.NewManual(time.Unix(1000, 0))
	q := newReplQuota(cfg, c, "follower", "follower.replication.throttled.rate")
	if d := q.delay(); d != 0 {
		t.Fatalf("idle quota delay %v", d)
	}
	q.record(3000000)
	d := q.delay()
	if d != 3*time.Second {
		t.Fatalf("delay after 3 MB at 1 MB/s: %v, want 3s", d)
	}
	c.Advance(d - time.Millisecond)
	if !q.exceeded() {
		t.Error("not exceeded just before the delay")
	}
	c.Advance(time.Millisecond)
	if q.exceeded() || q.delay() != 0 {
		t.Errorf("exceeded at the delay (%v left)", q.delay())
	}
}
