package sim

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/storage"
)

// The compacted topic of the real-broker world (docs/compaction.md).
// realCompactTopic has cleanup.policy=compact and small segments; the
// plain and the idempotent producers write it acks=all, each record keyed
// from a small key space, some of them tombstones (a null value). Every
// broker runs the log cleaner in step mode (Broker.StepClean), so the
// replicas clean their logs independently, at different times: their
// logs differ by the records removed, never in the offset or the value of
// a record they both hold.
//
// Kafka's guarantee (LogCleaner; the cleanup.policy and
// delete.retention.ms docs) is checked as the world learns the committed
// log: from acknowledgements, consumer reads and every replica's log
// below its own HW (all committed records):
//
//   - a record read at an offset is the record first seen committed there,
//     and a record is at one offset only;
//   - the latest committed record of each key is never removed from a
//     replica that copied it, unless it is a tombstone and
//     delete.retention.ms has passed since the first cleaner pass that
//     covered it on any replica (its delete horizon, KIP-534); once it is
//     gone, no older record of the key is left on that replica (a
//     deleted key never comes back).
//
// The check runs on a replica right after each of its cleaner passes,
// every realCheckEvery steps on every live replica, and on every replica
// after settling, when the leader's log holds every committed record:
// each replica then holds each key's latest committed value.

// Settings of realCompactTopic.
const (
	realCompactTopic = "c0"
	realCompactKeys  = 6
	// realDeleteRetention is its delete.retention.ms.
	realDeleteRetention = 200 * time.Millisecond
	// realTombstoneP is the share of its records that are tombstones.
	realTombstoneP = 0.2
)

// realCompactConfig is realCompactTopic's configuration: segments roll
// at 400 bytes or 300 ms, a log is due for cleaning at a dirty ratio of
// 0.1, records are cleanable at once.
func realCompactConfig(cfgs map[string]string) {
	cfgs["cleanup.policy"] = "compact"
	cfgs["segment.bytes"], cfgs["segment.ms"] = "400", "300"
	cfgs["min.cleanable.dirty.ratio"] = "0.1"
	cfgs["min.compaction.lag.ms"] = "0"
	cfgs["delete.retention.ms"] = strconv.Itoa(int(realDeleteRetention.Milliseconds()))
}

// simCompact is what the world knows of realCompactTopic.
type simCompact struct {
	// sent is every record produced, by value (its id: a tombstone's
	// is in its "id" header).
	sent map[string]compactSent
	// at is each committed offset's record; off each committed record's
	// offset.
	at  map[int64]string
	off map[string]int64
	// latest is each key's latest committed record known; tombs the
	// times each key's tombstones were first sent.
	latest [realCompactKeys]compactLatest
	tombs  [realCompactKeys][]time.Time
	// passes are the cleaner passes that moved a replica's cleaner
	// checkpoint: a tombstone's delete horizon is set by the first pass
	// that covers it on any replica (a follower copies the leader's
	// cleaned batches with their horizon).
	passes []cleanPass
}

// cleanPass is a cleaner pass that covered [from, to) at at.
type cleanPass struct {
	at       time.Time
	from, to int64
}

// firstCleaned is when a pass first covered off, if one did.
func (c *simCompact) firstCleaned(off int64) (time.Time, bool) {
	for _, p := range c.passes {
		if p.from <= off && off < p.to {
			return p.at, true
		}
	}
	return time.Time{}, false
}

type compactSent struct {
	key  int
	tomb bool
	at   time.Time // first sent
}

type compactLatest struct {
	id  string // "" while none is known
	off int64
}

func newSimCompact() *simCompact {
	return &simCompact{sent: map[string]compactSent{}, at: map[int64]string{}, off: map[string]int64{}}
}

func compactKey(k int) string { return "k" + strconv.Itoa(k) }

// compactRecords returns the record of a realCompactTopic batch with
// value id: a key from the key space, a tombstone now and then, chosen
// when id is first sent and kept for its retries.
func (w *realWorld) compactRecords(id string) []batchtest.Record {
	c := w.cmp
	s, ok := c.sent[id]
	if !ok {
		s = compactSent{key: w.rng.IntN(realCompactKeys), tomb: w.chance(realTombstoneP), at: w.clk.Now()}
		c.sent[id] = s
		if s.tomb {
			c.tombs[s.key] = append(c.tombs[s.key], s.at)
		}
	}
	r := batchtest.Record{Key: []byte(compactKey(s.key)), Value: []byte(id),
		Headers: []kmsg.Header{{Key: "id", Value: []byte(id)}}}
	if s.tomb {
		r.Value = nil
	}
	return []batchtest.Record{r}
}

// recordValue is a record's identity in the world: its value, or a
// tombstone's "id" header.
func recordValue(r batch.Record) []byte {
	if r.Value == nil {
		for _, h := range r.Headers {
			if h.Key == "id" {
				return h.Value
			}
		}
	}
	return r.Value
}

// compactLearn records that the committed log of realCompactTopic holds
// id at off (an acknowledgement, or a read below a HW), and fails if
// another record was committed there or id at another offset.
func (w *realWorld) compactLearn(off int64, id, where string) {
	c := w.cmp
	s, ok := c.sent[id]
	if !ok {
		w.fail("%s: %s-0@%d holds %q, which was never produced", where, realCompactTopic, off, id)
		return
	}
	if other, ok := c.at[off]; ok && other != id {
		w.fail("%s: %s-0@%d holds %q, committed there before: %q", where, realCompactTopic, off, id, other)
		return
	}
	if other, ok := c.off[id]; ok && other != off {
		w.fail("%s: %s-0 holds %q at %d, committed before at %d", where, realCompactTopic, id, off, other)
		return
	}
	c.at[off], c.off[id] = id, off
	if l := &c.latest[s.key]; l.id == "" || off > l.off {
		l.id, l.off = id, off
	}
}

// clean runs one cleaner pass on rb; when it moved realCompactTopic's
// cleaner checkpoint, it counts and remembers the pass and checks the
// replica at once (a tombstone removed too early is seen before time
// passes).
func (w *realWorld) clean(rb *realBroker) {
	p, err := rb.b.PartitionBy(realCompactTopic, 0, time.Time{})
	if err != nil {
		rb.b.StepClean()
		return
	}
	dirty := func() int64 { return p.Log().Cleanable(w.clk.Now(), p.LastStableOffset()).FirstDirty }
	before := dirty()
	rb.b.StepClean()
	if after := dirty(); after > before {
		w.stats.Cleans++
		w.cmp.passes = append(w.cmp.passes, cleanPass{at: w.clk.Now(), from: before, to: after})
		w.tracef("broker %d cleaned %s-0 from %d to %d", rb.id, realCompactTopic, before, after)
		w.checkCompacted(rb.id, p)
	}
}

// checkCompactedAll runs checkCompacted on every live replica.
func (w *realWorld) checkCompactedAll() {
	for _, rb := range w.upBrokers() {
		if p, err := rb.b.PartitionBy(realCompactTopic, 0, time.Time{}); err == nil {
			w.checkCompacted(rb.id, p)
		}
	}
}

// checkCompacted reads broker id's replica of realCompactTopic below its
// HW, learns what it holds (all committed) and checks it against what is
// known (the comment at the top of this file).
func (w *realWorld) checkCompacted(id int32, p *sbroker.Partition) {
	c := w.cmp
	l := p.Log()
	end, start := p.HighWatermark(), l.LogStartOffset()
	where := fmt.Sprintf("broker %d", id)
	var offs [realCompactKeys][]int64
	err := readBatchRecords(l, end, func(off int64, r batch.Record) bool {
		v := string(recordValue(r))
		s, ok := c.sent[v]
		if ok && (string(r.Key) != compactKey(s.key) || (r.Value == nil) != s.tomb) {
			w.fail("%s: %s-0@%d holds %q with key %q (tombstone %v), produced with key %s (tombstone %v)",
				where, realCompactTopic, off, v, r.Key, r.Value == nil, compactKey(s.key), s.tomb)
			return false
		}
		w.compactLearn(off, v, where)
		offs[s.key] = append(offs[s.key], off)
		return w.failed == ""
	})
	if err != nil {
		w.fail("%s: reading %s-0: %v", where, realCompactTopic, err)
	}
	if w.failed != "" {
		return
	}
	now := w.clk.Now()
	for k, latest := range c.latest {
		if latest.id == "" || latest.off >= end || latest.off < start || slices.Contains(offs[k], latest.off) {
			continue
		}
		// Removed: only a tombstone delete.retention.ms after the first
		// pass that covered it may be, or the key's latest record is a
		// later tombstone this world never saw committed, itself removed
		// (delete.retention.ms after it was sent, at least).
		s := c.sent[latest.id]
		gone := false
		if at, ok := c.firstCleaned(latest.off); ok && s.tomb {
			gone = !now.Before(at.Add(realDeleteRetention))
		}
		for _, t := range c.tombs[k] {
			gone = gone || t.After(s.at) && !now.Before(t.Add(realDeleteRetention))
		}
		if !gone {
			w.fail("%s: %s-0 (HW %d) lost the latest committed record of key %s, %q at %d (tombstone %v, sent at %d ms); it holds %v of the key",
				where, realCompactTopic, end, compactKey(k), latest.id, latest.off, s.tomb, s.at.Sub(w.start).Milliseconds(), offs[k])
			return
		}
		if len(offs[k]) > 0 {
			w.fail("%s: %s-0 (HW %d) removed key %s's latest committed record %q at %d (tombstone %v) and still holds the key at %v",
				where, realCompactTopic, end, compactKey(k), latest.id, latest.off, s.tomb, offs[k])
			return
		}
	}
}

// readBatchRecords calls fn with every record of l below end, in order,
// until fn returns false.
func readBatchRecords(l *storage.Log, end int64, fn func(off int64, r batch.Record) bool) error {
	// From the local log start: a tiered log holds no more locally
	// (realtier.go reads the rest through the Fetch handler).
	for off := l.LocalLogStartOffset(); off < end; {
		sl, err := l.Read(off, 1<<20, end)
		if err != nil {
			return err
		}
		b, err := sl.AppendTo(nil)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return nil
		}
		for len(b) > 0 {
			h, one, rest, err := batch.Next(b)
			if err != nil {
				return err
			}
			if h.IsControl() { // a transaction marker: no record
				off = h.NextOffset()
				b = rest
				continue
			}
			more := true
			if err := batch.Records(one, func(r batch.Record) bool {
				more = fn(h.BaseOffset+int64(r.OffsetDelta), r)
				return more
			}); err != nil {
				return err
			}
			if !more {
				return nil
			}
			off = h.NextOffset()
			b = rest
		}
	}
	return nil
}
