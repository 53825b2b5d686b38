package broker

import (
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
)

// sampledRate is a byte rate measured over n windows of one length
// (Kafka's Rate over a SampledStat, as RLMQuotaManager keeps for
// remote.log.manager.fetch.max.bytes.per.second with
// remote.log.manager.fetch.quota.window.num and .window.size.seconds).
type sampledRate struct {
	clock  clock.Clock
	bound  float64 // bytes per second
	n      int
	window time.Duration

	mu      sync.Mutex
	samples []rateSample // oldest first, at most n
}

func newSampledRate(c clock.Clock, bound float64, n int, window time.Duration) *sampledRate {
	return &sampledRate{clock: c, bound: bound, n: min(max(n, 2), 1000), window: max(window, time.Second)}
}

// purge drops the samples older than the n windows (mu held).
func (q *sampledRate) purge(now time.Time) {
	i := 0
	for i < len(q.samples) && now.Sub(q.samples[i].start) >= time.Duration(q.n)*q.window {
		i++
	}
	q.samples = q.samples[i:]
}

// record adds n bytes.
func (q *sampledRate) record(n int64) {
	if n <= 0 {
		return
	}
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
}

// exceeded reports whether the rate is over the bound. The rate is the
// bytes of the kept samples over the time they span, at least one window
// (so a first burst counts in full, as replQuota's rate).
func (q *sampledRate) exceeded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	q.purge(now)
	if len(q.samples) == 0 {
		return false
	}
	var sum float64
	for _, s := range q.samples {
		sum += s.bytes
	}
	span := max(now.Sub(q.samples[0].start), q.window)
	return sum/span.Seconds() > q.bound
}
