package broker_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/vfs"
)

// TestOneWriter: with retention, the flusher and the log cleaner all
// busy (in their own goroutines, as in production) while a client
// produces, every change of a partition's log runs as a step of the
// partition's owner, its one writer (Options.CheckWriters counts any
// other; docs/storage.md, "One writer").
func TestOneWriter(t *testing.T) {
	q := newFakeQuorum()
	m := startMemberWith(t, q, 1, "/data", "", vfs.NewMem(), map[string]string{
		"log.retention.check.interval.ms": "10",
		"log.cleaner.backoff.ms":          "10",
	})
	small := map[string]string{"segment.bytes": "2048", "segment.ms": "50"}
	ret := map[string]string{"retention.bytes": "4096"}
	cmp := map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
	for k, v := range small {
		ret[k], cmp[k] = v, v
	}
	if err := m.b.CreateTopic("ret", 2, 1, ret, false); err != nil {
		t.Fatal(err)
	}
	if err := m.b.CreateTopic("cmp", 2, 1, cmp, false); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.addr), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.WithLogger(kgo.BasicLogger(testWriter{t}, kgo.LogLevelWarn, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 3000 {
		for _, topic := range []string{"ret", "cmp"} {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i % 5)), Value: []byte(fmt.Sprintf("value-%06d", i))},
				func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
		}
		if i%300 == 0 {
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Retention deleted segments of "ret" and the cleaner cleaned "cmp":
	// each actor ran against the owner's appends.
	waitFor(t, "retention and cleaning", 30*time.Second, func() bool {
		for p := range int32(2) {
			rp, err := m.b.Partition("ret", p)
			if err != nil || rp.LogStartOffset() == 0 {
				return false
			}
			cp, err := m.b.Partition("cmp", p)
			if err != nil || cp.Log().Cleanable(time.Now(), cp.LastStableOffset()).FirstDirty == 0 {
				return false
			}
		}
		return true
	})
	if n, which := m.b.WriterViolations(); n > 0 {
		t.Fatalf("%d log changes outside their partition's owner: %s", n, which)
	}
}
