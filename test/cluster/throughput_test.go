package cluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestThroughputAcksAllRF3VsAcks1RF1 measures (t.Logf only, no assertion on
// speed) franz-go produce throughput on the same 3-node cluster: acks=all
// (idempotent) to an RF 3, min.insync.replicas=2 topic versus acks=1 to an
// RF 1 topic. SLUICE_TP_RECORDS overrides the record count (default 300k,
// 100-byte values, no compression, 3 partitions each).
func TestThroughputAcksAllRF3VsAcks1RF1(t *testing.T) {
	n := 300_000
	if v, err := strconv.Atoi(os.Getenv("SLUICE_TP_RECORDS")); err == nil && v > 0 {
		n = v
	}
	c := startCluster(t, 3, nil)
	const parts = 3
	c.CreateTopic("tp-rf1", parts, 1, nil, nil)
	c.CreateTopic("tp-rf3", parts, 3, map[string]string{"min.insync.replicas": "2"}, nil)

	run := func(topic string, opts ...kgo.Opt) float64 {
		t.Helper()
		cl := c.Client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerLinger(2 * time.Millisecond),
			kgo.MaxBufferedRecords(50_000)}, opts...)...)
		defer cl.Close()
		value := make([]byte, 100)
		for i := range value {
			value[i] = byte('a' + i%26)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var failed atomic.Int64
		var firstErr error
		var errOnce sync.Once
		var wg sync.WaitGroup
		wg.Add(n)
		start := time.Now()
		for i := 0; i < n; i++ {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
				}
				wg.Done()
			})
		}
		wg.Wait()
		el := time.Since(start)
		if f := failed.Load(); f > 0 {
			t.Fatalf("%s: %d of %d records failed: %v", topic, f, n, firstErr)
		}
		rate := float64(n) / el.Seconds()
		t.Logf("%s: %d records x 100 B in %v = %.0f rec/s (%.1f MB/s)", topic, n, el.Round(time.Millisecond), rate, rate*100/1e6)
		return rate
	}
	// Two alternating rounds; the first pays for connections and metadata.
	var one, all float64
	for round := 1; round <= 2; round++ {
		one = max(one, run("tp-rf1", kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()))
		all = max(all, run("tp-rf3", kgo.RequiredAcks(kgo.AllISRAcks())))
	}
	// Sanity: everything produced is in the logs.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := c.Admin().ListEndOffsets(ctx, "tp-rf1", "tp-rf3")
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"tp-rf1", "tp-rf3"} {
		var sum int64
		for _, lo := range ends[topic] {
			sum += lo.Offset
		}
		if sum != int64(2*n) {
			t.Errorf("%s holds %d records up to the high watermark, produced %d", topic, sum, 2*n)
		}
	}
	t.Logf("THROUGHPUT (best of 2): acks=1 RF1 %.0f rec/s, acks=all RF3 %.0f rec/s, ratio (acks=all RF3 / acks=1 RF1) = %s",
		one, all, fmt.Sprintf("%.2f", all/one))
}
