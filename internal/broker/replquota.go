package broker

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metrics"
)

// Replication throttles (KIP-73, Kafka's ReplicationQuotaManager): a
// broker-wide byte rate for each side of replication, applied only to the
// replicas a topic names as throttled and only while they are out of the
// ISR (Kafka's shouldLeaderThrottle / shouldFollowerThrottle), so that
// moving or rebuilding a replica cannot starve the traffic of in-sync ones.
//
// Settings (server.properties; the two rates are also dynamic broker
// configs, KIP-226: a change takes effect at once, setRate):
//
//	leader.replication.throttled.rate     bytes/s a leader sends to throttled followers (Long.MAX: unlimited)
//	follower.replication.throttled.rate   bytes/s a follower fetches for throttled replicas (Long.MAX: unlimited)
//	replication.quota.window.num          11 samples
//	replication.quota.window.size.seconds 1 s each
//
// and on each topic (dynamic, IncrementalAlterConfigs):
//
//	leader.replication.throttled.replicas   partition:broker,... or *: the replicas its leaders throttle
//	follower.replication.throttled.replicas partition:broker,... or *: the replicas that throttle themselves
//
// Leader side (handler/01_fetch.go): once the leader's rate of throttled
// bytes is over the bound, a follower fetch gets no records for throttled
// partitions (their fetch offsets are still taken), the others still
// flow; the bytes sent for throttled partitions are recorded. Follower
// side (fetcher.go): once over its bound, the fetcher leaves throttled
// partitions out of its requests, and records the bytes it receives for
// them.
type replQuota struct {
	side    string // "leader" or "follower", the metrics' label
	rateKey string // the setting of its rate
	clock   clock.Clock
	// bound is the bytes per second as float64 bits (setRate); 0:
	// unlimited.
	bound  atomic.Uint64
	window time.Duration
	n      int

	mu      sync.Mutex
	samples []rateSample // oldest first, at most n

	// lists caches parsed throttled-replica lists by their text.
	lists sync.Map // string -> throttledList
}

// rateSample is one window's bytes (Kafka's SampledStat.Sample).
type rateSample struct {
	start time.Time
	bytes float64
}

// newReplQuota reads rateKey (leader.replication.throttled.rate or
// follower.replication.throttled.rate) and the quota window settings.
func newReplQuota(cfg *config.Broker, c clock.Clock, side, rateKey string) *replQuota {
	q := &replQuota{side: side, clock: c, rateKey: rateKey,
		n:      int(min(max(cfg.Int("replication.quota.window.num", 11), 2), 1000)),
		window: time.Duration(min(max(cfg.Int("replication.quota.window.size.seconds", 1), 1), 3600)) * time.Second}
	q.setRate(cfg)
	return q
}

// setRate reads the quota's rate from cfg again (its effective value,
// dynamic or static). The samples are kept: a lowered rate throttles at
// once what was sent over it.
func (q *replQuota) setRate(cfg *config.Broker) {
	var bound float64
	if v, ok := cfg.Get(q.rateKey); ok {
		if r, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && r >= 0 && r < 1<<62 {
			bound = float64(r)
		}
	}
	q.bound.Store(math.Float64bits(bound))
}

// limit is the rate in bytes per second, 0 for unlimited.
func (q *replQuota) limit() float64 { return math.Float64frombits(q.bound.Load()) }

// enabled reports whether a rate is set.
func (q *replQuota) enabled() bool { return q.limit() > 0 }

// purge drops the samples older than the n windows; called with mu held.
func (q *replQuota) purge(now time.Time) {
	i := 0
	for i < len(q.samples) && now.Sub(q.samples[i].start) >= time.Duration(q.n)*q.window {
		i++
	}
	q.samples = q.samples[i:]
}

// record adds n bytes of throttled replicas (Kafka's
// ReplicationQuotaManager.record).
func (q *replQuota) record(n int64) {
	if n <= 0 || !q.enabled() {
		return
	}
	metrics.ReplicationThrottledBytes.WithLabelValues(q.side).Add(float64(n))
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	q.purge(now)
	if k := len(q.samples); k == 0 || now.Sub(q.samples[k-1].start) >= q.window {
		if k == q.n {
			q.samples = q.samples[1:]
		}
		q.samples = append(q.samples, rateSample{start: now})
	}
	q.samples[len(q.samples)-1].bytes += float64(n)
	metrics.ReplicationThrottledRate.WithLabelValues(q.side).Set(q.rateLocked(now))
}

// rateLocked is the bytes of the kept samples over the time they span.
// Kafka's Rate pads a young span to n-1 windows, which lets a throttle
// started on an idle broker pass n-1 windows' worth of bytes at once;
// sluice pads it to one window only, so the first second is bounded too.
func (q *replQuota) rateLocked(now time.Time) float64 {
	if len(q.samples) == 0 {
		return 0
	}
	var sum float64
	for _, s := range q.samples {
		sum += s.bytes
	}
	span := max(now.Sub(q.samples[0].start), q.window)
	return sum / span.Seconds()
}

// exceeded reports whether the throttled bytes' rate is over the bound
// (Kafka's isQuotaExceeded).
func (q *replQuota) exceeded() bool {
	if !q.enabled() {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	q.purge(now)
	r := q.rateLocked(now)
	metrics.ReplicationThrottledRate.WithLabelValues(q.side).Set(r)
	return r > q.limit()
}

// delay is how long until the rate is back at the bound if nothing more
// is recorded (0 if it is not over it): a throttled fetch waits that long
// rather than a whole long poll, so the rate does not undershoot.
func (q *replQuota) delay() time.Duration {
	bound := q.limit()
	if bound <= 0 {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	q.purge(now)
	if len(q.samples) == 0 {
		return 0
	}
	var sum float64
	for _, s := range q.samples {
		sum += s.bytes
	}
	// sum / (now + d - start) <= bound, with the span at least a window.
	need := time.Duration(sum / bound * float64(time.Second))
	return max(q.samples[0].start.Add(max(need, q.window)).Sub(now), 0)
}

// throttledList is a parsed *.replication.throttled.replicas value.
type throttledList struct {
	all     bool
	entries map[[2]int32]bool // partition, broker
}

// throttles reports whether a topic's throttled-replicas value names the
// replica of partition on broker (Kafka's isThrottled).
func (q *replQuota) throttles(value string, partition, broker int32) bool {
	value = strings.TrimSpace(value)
	if value == "" {
		return false
	}
	var l throttledList
	if v, ok := q.lists.Load(value); ok {
		l = v.(throttledList)
	} else {
		l = parseThrottledList(value)
		q.lists.Store(value, l)
	}
	return l.all || l.entries[[2]int32{partition, broker}]
}

// parseThrottledList parses "*" or "partition:broker,..." (malformed
// entries, which config validation refuses, are skipped).
func parseThrottledList(v string) throttledList {
	l := throttledList{entries: map[[2]int32]bool{}}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "*" {
			l.all = true
			continue
		}
		ps, bs, ok := strings.Cut(e, ":")
		p, err1 := strconv.ParseInt(strings.TrimSpace(ps), 10, 32)
		b, err2 := strconv.ParseInt(strings.TrimSpace(bs), 10, 32)
		if ok && err1 == nil && err2 == nil {
			l.entries[[2]int32{int32(p), int32(b)}] = true
		}
	}
	return l
}

// throttled reports whether replica's copy of p is throttled on q's side:
// the topic's list (leader. or follower.replication.throttled.replicas)
// names it and it is out of p's ISR.
func (b *Broker) throttled(q *replQuota, key string, p *Partition, replica int32) bool {
	if !q.enabled() {
		return false
	}
	t := b.Image().Topics[p.Topic]
	if t == nil || !q.throttles(t.Configs[key], p.Partition, replica) {
		return false
	}
	return !p.inISR(replica)
}

// LeaderThrottled reports whether the leader's answers to replica's
// fetches of p are throttled (Kafka's ReplicaManager.shouldLeaderThrottle,
// but for the quota check: LeaderQuotaExceeded).
func (b *Broker) LeaderThrottled(p *Partition, replica int32) bool {
	return b.throttled(b.leaderQuota, "leader.replication.throttled.replicas", p, replica)
}

// LeaderQuotaExceeded reports whether leader.replication.throttled.rate
// is exceeded: throttled partitions then get no records.
func (b *Broker) LeaderQuotaExceeded() bool { return b.leaderQuota.exceeded() }

// LeaderQuotaDelay is how long until leader.replication.throttled.rate
// is no longer exceeded (0 if it is not): a follower fetch whose
// throttled partitions were held re-reads them then.
func (b *Broker) LeaderQuotaDelay() time.Duration { return b.leaderQuota.delay() }

// RecordLeaderThrottled records n bytes sent to followers for throttled
// partitions; skipped counts the throttled partitions sent none.
func (b *Broker) RecordLeaderThrottled(n int64, skipped int) {
	b.leaderQuota.record(n)
	if skipped > 0 {
		metrics.ReplicationThrottledSkips.WithLabelValues("leader").Add(float64(skipped))
	}
}
