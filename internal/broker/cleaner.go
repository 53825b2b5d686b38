package broker

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/storage"
)

// The log cleaner (Kafka's LogCleaner): log.cleaner.threads goroutines,
// each of which repeatedly picks the compacted log most in need of
// cleaning and runs one storage.Log.Clean pass over it. Every replica
// cleans its own log, leader or follower, as in Kafka. docs/compaction.md
// has the rules.
//
// Settings (server.properties, Kafka's names and defaults):
//
//	log.cleaner.enable                   true
//	log.cleaner.threads                  1
//	log.cleaner.dedupe.buffer.size       134217728 bytes, shared by the threads
//	log.cleaner.io.max.bytes.per.second  unlimited; read and write bytes, all threads
//	log.cleaner.backoff.ms               15000: the sleep when nothing is due
type cleaner struct {
	b        *Broker
	throttle *throttler

	mu sync.Mutex
	// threads, backoff and budget (offset map bytes per thread) are the
	// settings in effect (reconfigure); alive marks the threads running,
	// by index: a thread whose index is no longer below threads ends
	// after its pass.
	threads     int
	backoff     time.Duration
	budget      int
	alive       map[int]bool
	running     map[*Partition]bool
	uncleanable map[*Partition]bool // corrupt: skipped until the partition is reopened
	lastRun     time.Time
}

// cleanerSettings are the cleaner's dynamic settings (Kafka's
// LogCleaner.ReconfigurableConfigs that sluice acts on).
type cleanerSettings struct {
	threads int
	backoff time.Duration
	budget  int
	rate    float64
}

// cleanerSettingsOf reads the settings' effective values.
func (b *Broker) cleanerSettingsOf() cleanerSettings {
	threads := int(min(max(b.cfg.Int("log.cleaner.threads", 1), 1), 64))
	rate := 0.0
	if v, ok := b.cfg.Get("log.cleaner.io.max.bytes.per.second"); ok && !b.steps {
		rate, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
	}
	return cleanerSettings{
		threads: threads,
		backoff: time.Duration(max(b.cfg.Int("log.cleaner.backoff.ms", 15000), 10)) * time.Millisecond,
		budget:  int(min(b.cfg.Int("log.cleaner.dedupe.buffer.size", 128<<20), 1<<34) / int64(threads)),
		rate:    rate,
	}
}

// startCleaner starts the cleaner threads unless log.cleaner.enable is
// false.
func (b *Broker) startCleaner() {
	c := b.newCleaner()
	if c == nil {
		return
	}
	metrics.CleanerSinceLastRun.Set(0)
	b.cleaner.Store(c)
	b.wg.Add(c.threads)
	for i := 0; i < c.threads; i++ {
		c.alive[i] = true
		go func() {
			defer c.b.wg.Done()
			c.run(i)
		}()
	}
}

// newCleaner returns the cleaner the settings describe, or nil when
// log.cleaner.enable is false. In step mode its throttle never sleeps:
// StepClean runs on the simulator's goroutine, whose manual clock only
// moves between steps.
func (b *Broker) newCleaner() *cleaner {
	if !b.cfg.Bool("log.cleaner.enable", true) {
		return nil
	}
	st := b.cleanerSettingsOf()
	return &cleaner{
		b:           b,
		threads:     st.threads,
		throttle:    newThrottler(b.clock, st.rate),
		backoff:     st.backoff,
		budget:      st.budget,
		alive:       map[int]bool{},
		running:     map[*Partition]bool{},
		uncleanable: map[*Partition]bool{},
		lastRun:     b.now(),
	}
}

// reconfigure applies the cleaner settings' current values (dynamic
// broker configs, as Kafka's LogCleaner.reconfigure): the rate at once,
// the backoff from the next sleep, the map budget from each thread's next
// pass; threads beyond the new count end after their pass, new ones
// start now.
func (c *cleaner) reconfigure() {
	st := c.b.cleanerSettingsOf()
	c.throttle.setRate(st.rate)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.threads, c.backoff, c.budget = st.threads, st.backoff, st.budget
	for i := 0; i < c.threads; i++ {
		if c.alive[i] {
			continue
		}
		c.alive[i] = true
		if !c.b.goBackground(func() { c.run(i) }) {
			delete(c.alive, i)
		}
	}
}

// settings returns thread i's backoff and budget, or ok false once the
// thread is beyond the count (it is then no longer alive).
func (c *cleaner) settings(i int) (backoff time.Duration, budget int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= c.threads {
		delete(c.alive, i)
		return 0, 0, false
	}
	return c.backoff, c.budget, true
}

// run is cleaner thread i.
func (c *cleaner) run(i int) {
	var m *storage.OffsetMap
	mapBudget := -1
	for {
		select {
		case <-c.b.closing:
			return
		default:
		}
		backoff, budget, ok := c.settings(i)
		if !ok {
			return
		}
		if budget != mapBudget {
			m, mapBudget = storage.NewOffsetMap(budget), budget
		}
		if c.once(m) {
			continue
		}
		metrics.CleanerSinceLastRun.Set(float64(clock.Since(c.b.clock, c.lastRunTime()).Milliseconds()))
		select {
		case <-c.b.closing:
			return
		case <-clock.After(c.b.clock, backoff):
		}
	}
}

// once picks the log most in need of cleaning and runs one Clean pass
// over it with m as the offset map; false when no log is due.
func (c *cleaner) once(m *storage.OffsetMap) bool {
	p := c.pick()
	if p == nil {
		return false
	}
	t0 := c.b.now()
	metrics.CleanerRunning.Inc()
	st, err := p.log.Clean(c.b.now(), p.LastStableOffset(), m, c.throttle.wait)
	metrics.CleanerRunning.Dec()
	c.done(p)
	metrics.CleanerBufferBytes.Set(float64(m.Bytes()))
	metrics.CleanerReadBytes.Add(float64(st.BytesRead))
	metrics.CleanerWrittenBytes.Add(float64(st.BytesWritten))
	metrics.CleanerRecordsRemoved.Add(float64(st.RecordsRemoved))
	switch {
	case err == nil:
		metrics.CleanerPasses.Inc()
		c.b.log.Debug("cleaned", "topic", p.Topic, "partition", p.Partition, "dirty", st.FirstDirty, "end", st.End,
			"segments", st.Segments, "groups", st.Groups, "read", st.BytesRead, "written", st.BytesWritten,
			"removed", st.RecordsRemoved, "keys", st.MapKeys, "took", clock.Since(c.b.clock, t0).Round(time.Millisecond))
	case errors.Is(err, storage.ErrCleanAborted):
	case errors.Is(err, storage.ErrFailed):
		p.ioFailed("clean", err)
	default:
		// Corrupt data: Kafka marks the partition uncleanable
		// (LogCleanerManager.markPartitionUncleanable) and goes on.
		c.b.log.Error("log cleaner: partition marked uncleanable", "topic", p.Topic, "partition", p.Partition, "err", err)
		c.mu.Lock()
		c.uncleanable[p] = true
		c.mu.Unlock()
	}
	return true
}

// pick chooses the log to clean (LogCleanerManager.grabFilthiestCompactedLog):
// among compacted logs that are due, one past max.compaction.lag.ms or a
// tombstone horizon first, else the highest dirty ratio. It updates the
// dirty-ratio and backlog metrics on the way.
func (c *cleaner) pick() *Partition {
	now := c.b.now()
	var best *Partition
	var bestInfo storage.CleanableInfo
	maxRatio, backlog, due := 0.0, int64(0), 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.b.Partitions() {
		if !p.log.Config().Compact || c.uncleanable[p] {
			continue
		}
		ci := p.log.Cleanable(now, p.LastStableOffset())
		maxRatio = max(maxRatio, ci.DirtyRatio)
		if !ci.Due {
			continue
		}
		due++
		backlog += ci.DirtyBytes
		if c.running[p] {
			continue
		}
		if best == nil || (ci.Urgent && !bestInfo.Urgent) || (ci.Urgent == bestInfo.Urgent && ci.DirtyRatio > bestInfo.DirtyRatio) {
			best, bestInfo = p, ci
		}
	}
	metrics.CleanerMaxDirtyPercent.Set(100 * maxRatio)
	metrics.CleanerBacklogBytes.Set(float64(backlog))
	metrics.CleanerBacklogPartitions.Set(float64(due))
	if best != nil {
		c.running[best] = true
	}
	return best
}

func (c *cleaner) done(p *Partition) {
	c.mu.Lock()
	delete(c.running, p)
	c.lastRun = c.b.now()
	c.mu.Unlock()
	metrics.CleanerSinceLastRun.Set(0)
}

func (c *cleaner) lastRunTime() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastRun
}

// throttler bounds the cleaner's I/O to a rate shared by all threads
// (Kafka's Throttler on log.cleaner.io.max.bytes.per.second).
type throttler struct {
	clock clock.Clock
	mu    sync.Mutex
	rate  float64 // bytes per second; 0: unlimited
	start time.Time
	bytes float64
}

func newThrottler(c clock.Clock, rate float64) *throttler {
	t := &throttler{clock: c, start: c.Now()}
	t.setRate(rate)
	return t
}

// setRate changes the rate (<= 0 or huge: unlimited).
func (t *throttler) setRate(rate float64) {
	if rate <= 0 || rate >= math.MaxFloat64/2 {
		rate = 0
	}
	t.mu.Lock()
	t.rate = rate
	t.mu.Unlock()
}

// wait accounts n bytes and sleeps as long as the rate requires.
func (t *throttler) wait(n int64) {
	t.mu.Lock()
	if t.rate == 0 {
		t.mu.Unlock()
		return
	}
	now := t.clock.Now()
	if now.Sub(t.start) > time.Second {
		t.start, t.bytes = now, 0
	}
	t.bytes += float64(n)
	ahead := time.Duration(t.bytes/t.rate*float64(time.Second)) - now.Sub(t.start)
	t.mu.Unlock()
	if ahead > 0 {
		t.clock.Sleep(ahead)
	}
}
