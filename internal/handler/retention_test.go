package handler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/clock"
)

// TestCompactOnlyTopicKeepsItsData is the regression test for compacted
// topics deleted by retention: a compact-only topic with retention.ms=1000
// and many rolled segments keeps every record, while a delete topic with
// the same settings, beside it, is trimmed (so retention did run). Kafka
// applies retention.ms and retention.bytes only when cleanup.policy
// contains delete (LogConfig.delete); Kafka Connect's and Schema
// Registry's topics rely on it.
func TestCompactOnlyTopicKeepsItsData(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, "", map[string]string{"log.retention.check.interval.ms": "50"}, clk)
	cl := n.client()
	small := func(policy string) map[string]*string {
		return map[string]*string{"cleanup.policy": strp(policy), "retention.ms": strp("1000"),
			"retention.bytes": strp("1"), "segment.bytes": strp("1024")}
	}
	createTopic(t, cl, "connect-configs", 1, small("compact"))
	createTopic(t, cl, "control", 1, small("delete"))
	const N = 60
	value := strings.Repeat("x", 100)
	for _, topic := range []string{"connect-configs", "control"} {
		for i := 0; i < N; i++ {
			r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(value)}
			if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm := kadm.NewClient(cl)
	// Past retention.ms, with a few retention passes; then wait for a
	// pass that started at that time or later to complete, rather than
	// sleeping through passes hoped to have run.
	for i := 0; i < 3; i++ {
		clk.Advance(time.Second)
		retentionPass(t, n, clk.Now())
	}
	starts, err := adm.ListStartOffsets(ctx(t), "control")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("control", 0); o.Err != nil || o.Offset == 0 {
		t.Fatalf("retention did not trim the delete topic: log start %d (%v)", o.Offset, o.Err)
	}
	starts, err = adm.ListStartOffsets(ctx(t), "connect-configs")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("connect-configs", 0); o.Err != nil || o.Offset != 0 {
		t.Fatalf("compact-only topic's log start moved to %d (%v)", o.Offset, o.Err)
	}
	got := consume(t, n, "connect-configs", N)
	for i, r := range got {
		if r.Offset != int64(i) || string(r.Key) != fmt.Sprintf("k%d", i) {
			t.Fatalf("record %d: offset %d key %q", i, r.Offset, r.Key)
		}
	}
}

// retentionPass waits until a retention pass of n that started at at or
// later has completed (the broker's clock is at at or past it).
func retentionPass(t *testing.T, n *node, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.b.RetentionCheckedAt().Before(at) {
		if time.Now().After(deadline) {
			t.Fatalf("no retention pass as of %v: the last started at %v", at, n.b.RetentionCheckedAt())
		}
		time.Sleep(time.Millisecond)
	}
}
