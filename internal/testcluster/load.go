package testcluster

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Ack is where a record was written: its partition and offset.
type Ack struct {
	Partition int32
	Offset    int64
}

type ackEvent struct {
	at        time.Time
	partition int32
}

// LoadOptions configure StartLoad. Zero values pick defaults.
type LoadOptions struct {
	// Partitions are produced to round-robin (default: partition 0).
	Partitions []int32
	// Rate is the target in records per second: every Tick,
	// max(1, Rate/(ticks per second)) records are produced.
	Rate int
	// Tick is the production step (default 5 ms).
	Tick time.Duration
	// MaxInFlight bounds the records produced but not yet acknowledged
	// or failed (default 2000).
	MaxInFlight int
	// ClientOpts are appended to the producer's options (e.g. other
	// seeds, other acks, a logger).
	ClientOpts []kgo.Opt
}

// Load is a producer of unique values (topic-%09d) at a steady rate,
// idempotent with acks=all unless LoadOptions.ClientOpts say otherwise,
// retrying without limit; it records every acknowledgement.
type Load struct {
	t          testing.TB
	cl         *kgo.Client
	topic      string
	partitions []int32

	mu       sync.Mutex
	acked    map[string]Ack
	ackLog   []ackEvent
	failed   map[string]error
	lastAck  time.Time
	maxGap   time.Duration
	maxGapAt time.Time
	sent     int

	stopc chan struct{}
	done  chan struct{}
	recWG sync.WaitGroup
}

// StartLoad starts producing to topic; call Stop (or Abort) when done.
func (c *Cluster) StartLoad(topic string, o LoadOptions) *Load {
	c.t.Helper()
	if len(o.Partitions) == 0 {
		o.Partitions = []int32{0}
	}
	if o.Tick == 0 {
		o.Tick = 5 * time.Millisecond
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 2000
	}
	lg := &Load{
		t: c.t, topic: topic, partitions: o.Partitions,
		acked: map[string]Ack{}, failed: map[string]error{},
		stopc: make(chan struct{}), done: make(chan struct{}),
	}
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
	lg.cl = c.Client(append(opts, o.ClientOpts...)...)
	perTick := max(1, o.Rate/int(time.Second/o.Tick))
	go lg.run(perTick, o.Tick, o.MaxInFlight)
	return lg
}

func (lg *Load) run(perTick int, every time.Duration, maxInFlight int) {
	defer close(lg.done)
	sem := make(chan struct{}, maxInFlight)
	tick := time.NewTicker(every)
	defer tick.Stop()
	seq := 0
	for {
		select {
		case <-lg.stopc:
			return
		case <-tick.C:
		}
		for range perTick {
			select {
			case sem <- struct{}{}:
			case <-lg.stopc:
				return
			}
			v := fmt.Sprintf("%s-%09d", lg.topic, seq)
			part := lg.partitions[seq%len(lg.partitions)]
			seq++
			lg.recWG.Add(1)
			lg.mu.Lock()
			lg.sent++
			lg.mu.Unlock()
			lg.cl.Produce(context.Background(), &kgo.Record{Value: []byte(v), Partition: part}, func(r *kgo.Record, err error) {
				defer lg.recWG.Done()
				defer func() { <-sem }()
				now := time.Now()
				lg.mu.Lock()
				defer lg.mu.Unlock()
				if err != nil {
					lg.failed[v] = err
					return
				}
				if prev, dup := lg.acked[v]; dup {
					lg.t.Errorf("value %s acknowledged twice (%v and %d/%d)", v, prev, r.Partition, r.Offset)
				}
				lg.acked[v] = Ack{r.Partition, r.Offset}
				lg.ackLog = append(lg.ackLog, ackEvent{now, r.Partition})
				if !lg.lastAck.IsZero() && now.Sub(lg.lastAck) > lg.maxGap {
					lg.maxGap, lg.maxGapAt = now.Sub(lg.lastAck), now
				}
				lg.lastAck = now
			})
		}
	}
}

// AcksSince counts the acknowledgements after t (of one partition, or of
// all if part < 0) and returns the first one's time.
func (lg *Load) AcksSince(t time.Time, part int32) (n int, first time.Time) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for i := len(lg.ackLog) - 1; i >= 0 && lg.ackLog[i].at.After(t); i-- {
		if part < 0 || lg.ackLog[i].partition == part {
			n++
			first = lg.ackLog[i].at
		}
	}
	return n, first
}

// MaxGap is the longest time between consecutive acknowledgements of one
// partition (part < 0: of any partition) among those acknowledged in
// [from, to] (zero times: unbounded), and when it ended.
func (lg *Load) MaxGap(part int32, from, to time.Time) (gap time.Duration, at time.Time) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	var last time.Time
	for _, e := range lg.ackLog {
		if part >= 0 && e.partition != part {
			continue
		}
		if (from.IsZero() || !e.at.Before(from)) && (to.IsZero() || !e.at.After(to)) {
			if !last.IsZero() && e.at.Sub(last) > gap {
				gap, at = e.at.Sub(last), e.at
			}
		}
		last = e.at
	}
	return gap, at
}

// Stop stops producing new records and waits (up to timeout, else the test
// fails) until every record produced so far is acknowledged or failed. A
// second call does nothing.
func (lg *Load) Stop(timeout time.Duration) {
	lg.t.Helper()
	select {
	case <-lg.stopc:
		return
	default:
	}
	close(lg.stopc)
	<-lg.done
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := lg.cl.Flush(ctx); err != nil {
		lg.t.Fatalf("producer flush: %v (records still unacknowledged %v after stop; %s)", err, timeout, lg.Summary())
	}
	lg.recWG.Wait()
}

// Abort stops producing without waiting (for defer on failure paths).
func (lg *Load) Abort() {
	select {
	case <-lg.stopc:
	default:
		close(lg.stopc)
	}
}

// Acked returns a copy of the acknowledged records: value -> where.
func (lg *Load) Acked() map[string]Ack {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return maps.Clone(lg.acked)
}

// Failures returns how many records failed, and one of them with its
// error.
func (lg *Load) Failures() (n int, value string, err error) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for v, err := range lg.failed {
		return len(lg.failed), v, err
	}
	return 0, "", nil
}

// Summary is a one-line account for test logs: records sent, acknowledged
// and failed, and the longest gap between any two acknowledgements.
func (lg *Load) Summary() string {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return fmt.Sprintf("sent=%d acked=%d failed=%d maxAckGap=%v", lg.sent, len(lg.acked), len(lg.failed), lg.maxGap.Round(time.Millisecond))
}

// ConsumeAll reads partitions 0..partitions-1 of the topic from offset 0
// up to their high watermarks (as ListOffsets reports them, retried until
// it answers) with a franz-go consumer and returns value -> where it was
// read. A value read twice is a test error.
func (c *Cluster) ConsumeAll(topic string, partitions int32, timeout time.Duration) map[string]Ack {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	adm := c.Admin()
	var ends kadm.ListedOffsets
	var err error
	for {
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil && ends.Error() == nil {
			break
		}
		if ctx.Err() != nil {
			c.t.Fatalf("ListEndOffsets %s: %v %v", topic, err, ends.Error())
		}
		time.Sleep(200 * time.Millisecond)
	}
	hw := map[int32]int64{}
	offs := map[int32]kgo.Offset{}
	for part := int32(0); part < partitions; part++ {
		lo, ok := ends.Lookup(topic, part)
		if !ok {
			c.t.Fatalf("ListEndOffsets: no %s/%d", topic, part)
		}
		hw[part] = lo.Offset
		offs[part] = kgo.NewOffset().At(0)
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	out := map[string]Ack{}
	next := map[int32]int64{}
	remaining := func() int {
		n := 0
		for part, h := range hw {
			if next[part] < h {
				n++
			}
		}
		return n
	}
	for remaining() > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("consuming %s: %v; next %v, HW %v", topic, ctx.Err(), next, hw)
		}
		fs.EachError(func(t string, p int32, err error) {
			c.t.Logf("consume %s/%d: %v (retrying)", t, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if prev, dup := out[v]; dup {
				c.t.Errorf("value %q read twice: at %d/%d and %d/%d", v, prev.Partition, prev.Offset, r.Partition, r.Offset)
			}
			out[v] = Ack{r.Partition, r.Offset}
			next[r.Partition] = r.Offset + 1
		})
	}
	return out
}

// CheckAcked fails the test unless every acknowledged value was read at
// its acknowledged partition and offset.
func CheckAcked(t testing.TB, what string, acked, read map[string]Ack) {
	t.Helper()
	missing := 0
	for v, a := range acked {
		if got, ok := read[v]; !ok || got != a {
			if missing < 10 {
				t.Errorf("%s: acknowledged %s at %d/%d, found at %v (present=%v)", what, v, a.Partition, a.Offset, got, ok)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%s: %d of %d acknowledged records missing or moved", what, missing, len(acked))
	}
}
