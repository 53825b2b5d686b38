package groups

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	chainRecords    = 100000
	chainStages     = 3
	chainPartitions = 6
)

// chainMember is one member of a stage: it consumes topic in, appends
// "|sN" to each value, produces the result to out with an idempotent
// acks=all producer and, once every produced record is acknowledged,
// commits the consumed offsets, and only then allows a rebalance. Without
// faults and with clean rebalances that is exactly-once.
type chainMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	polled atomic.Int64
}

func startChainMember(t *testing.T, c *cluster, stage int, name, group, in, out string, errs chan<- error) *chainMember {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(true)...), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RebalanceTimeout(30*time.Second),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.DefaultProduceTopic(out), kgo.ProducerLinger(5*time.Millisecond),
		debugLogger(name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &chainMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	suffix := fmt.Sprintf("|s%d", stage)
	fail := func(err error) {
		select {
		case errs <- fmt.Errorf("%s: %w", name, err):
		default:
		}
	}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollRecords(ctx, 10000)
			if ctx.Err() != nil {
				cl.AllowRebalance()
				return
			}
			fs.EachError(func(tp string, p int32, err error) { fail(fmt.Errorf("fetch %s/%d: %w", tp, p, err)) })
			recs := fs.Records()
			if len(recs) > 0 {
				outs := make([]*kgo.Record, len(recs))
				for i, r := range recs {
					outs[i] = &kgo.Record{Key: r.Key, Value: append(append([]byte(nil), r.Value...), suffix...)}
				}
				if err := cl.ProduceSync(ctx, outs...).FirstErr(); err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("produce: %w", err))
					}
					cl.AllowRebalance()
					return
				}
				// Produced and acknowledged: now the input may be
				// committed.
				if err := cl.CommitRecords(ctx, recs...); err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("commit: %w", err))
					}
					cl.AllowRebalance()
					return
				}
				m.polled.Add(int64(len(recs)))
			}
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(func() { m.cancel(); cl.Close() })
	return m
}

func (m *chainMember) stop() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

// TestChainExactlyOnce: three groups in a row (consume → transform →
// produce), 100,000 records through each, two members per stage, and a
// third member joining the middle stage mid-stream (a clean rebalance).
// At the end the last topic holds every record exactly once, carrying the
// mark of every stage, every intermediate topic holds exactly 100,000
// records, and every group's committed offsets are at the log end.
func TestChainExactlyOnce(t *testing.T) {
	c := startCluster(t)
	topic := func(i int) string { return fmt.Sprintf("chain-%d", i) }
	group := func(i int) string { return fmt.Sprintf("chain-g%d", i) }
	for i := 0; i <= chainStages; i++ {
		c.CreateTopic(topic(i), chainPartitions, 3, nil, nil)
	}
	t0 := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }
	errs := make(chan error, 1)
	var members []*chainMember
	var mu sync.Mutex
	add := func(stage, n int) {
		m := startChainMember(t, c, stage, fmt.Sprintf("s%d-m%d", stage, n), group(stage), topic(stage-1), topic(stage), errs)
		mu.Lock()
		members = append(members, m)
		mu.Unlock()
	}
	for s := 1; s <= chainStages; s++ {
		add(s, 1)
		add(s, 2)
	}
	for s := 1; s <= chainStages; s++ {
		c.waitStable(group(s), 2, 60*time.Second)
	}
	step("3 stages of 2 members stable")

	produced := make(chan struct{})
	go func() {
		defer close(produced)
		c.produceChunked(topic(0), "c", 0, chainRecords, 10000)
	}()
	// A member joins stage 2 once records flow through it.
	deadline := time.Now().Add(60 * time.Second)
	for c.sumEnd(topic(2)) < chainRecords/10 {
		if time.Now().After(deadline) {
			t.Fatalf("stage 2 produced %d records after 60s", c.sumEnd(topic(2)))
		}
		time.Sleep(50 * time.Millisecond)
	}
	add(2, 3)
	c.waitStable(group(2), 3, 60*time.Second)
	step("stage 2 has a third member")
	<-produced
	step("100,000 records produced to stage 0")

	deadline = time.Now().Add(150 * time.Second)
	for {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		if c.sumEnd(topic(chainStages)) >= chainRecords {
			break
		}
		if time.Now().After(deadline) {
			for i := 1; i <= chainStages; i++ {
				t.Logf("%s: %d records", topic(i), c.sumEnd(topic(i)))
			}
			t.Fatalf("last stage has %d records after 150s, want %d", c.sumEnd(topic(chainStages)), chainRecords)
		}
		time.Sleep(100 * time.Millisecond)
	}
	step("last stage complete")
	for s := 1; s <= chainStages; s++ {
		c.waitCommittedAtEnd(group(s), topic(s-1), 60*time.Second)
	}
	step("committed offsets at the log end")
	mu.Lock()
	for _, m := range members {
		m.stop()
	}
	mu.Unlock()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	for i := 1; i < chainStages; i++ {
		if n := c.sumEnd(topic(i)); n != chainRecords {
			t.Errorf("%s holds %d records, want %d (duplicates or losses in stage %d)", topic(i), n, chainRecords, i)
		}
	}

	// Read the last topic back, outside any group.
	want := ""
	for s := 1; s <= chainStages; s++ {
		want += fmt.Sprintf("|s%d", s)
	}
	seen := c.readAll(topic(chainStages))
	counts := make([]int, chainRecords)
	bad := 0
	for _, v := range seen {
		var i int
		base, ok := strings.CutSuffix(v, want)
		if ok {
			_, err := fmt.Sscanf(base, "c-%07d", &i)
			ok = err == nil && i >= 0 && i < chainRecords && value("c", i) == base
		}
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("unexpected value %q in %s", v, topic(chainStages))
			}
			continue
		}
		counts[i]++
	}
	missing, dups := 0, 0
	for i, n := range counts {
		switch {
		case n == 0:
			if missing++; missing <= 5 {
				t.Errorf("record %d missing at the last stage", i)
			}
		case n > 1:
			if dups++; dups <= 5 {
				t.Errorf("record %d appears %d times at the last stage", i, n)
			}
		}
	}
	if missing+dups+bad > 0 {
		t.Fatalf("last stage: %d records, %d missing, %d duplicated, %d unexpected", len(seen), missing, dups, bad)
	}
	step(fmt.Sprintf("last stage holds each of %d records exactly once", chainRecords))
}

// sumEnd adds up the end offsets of topic's partitions.
func (c *cluster) sumEnd(topic string) int {
	n := 0
	for _, o := range c.endOffsets(topic) {
		n += int(o)
	}
	return n
}

// readAll reads every record of topic up to its current end offsets
// (no group) and returns the values.
func (c *cluster) readAll(topic string) []string {
	c.t.Helper()
	ends := c.endOffsets(topic)
	offs := map[int32]kgo.Offset{}
	total := 0
	for p, e := range ends {
		offs[p] = kgo.NewOffset().AtStart()
		total += int(e)
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(200*time.Millisecond))
	ctx := tctx(c.t, 60*time.Second)
	out := make([]string, 0, total)
	for len(out) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("reading %s: %d of %d records after 60s", topic, len(out), total)
		}
		fs.EachError(func(tp string, p int32, err error) { c.t.Fatalf("reading %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}
