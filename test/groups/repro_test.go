package groups

import (
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReproAcksAllLatency reproduces a replication-layer problem that
// every group operation on a replicated cluster pays for (it is not a
// coordinator bug, and is skipped unless GROUPS_REPRO is set): on a
// three-node cluster an acks=all produce to a replication-factor-3
// partition takes replica.fetch wait (500 ms) instead of milliseconds,
// and so does every OffsetCommit and SyncGroup (both wait for the high
// watermark of their __consumer_offsets partition). acks=1 and
// replication factor 1 take about a millisecond.
//
// Cause (internal/broker/fetcher.go): a follower only fetches a
// partition once what it appended is flushed (replica.FetchRequest wants
// flushed == LEO), so right after receiving records the partition drops
// out of the fetcher's next request; the fetcher then long-polls the
// leader with the remaining partitions (MaxWaitMillis 500) and the
// flushed partition waits for that poll to time out before it can report
// its new offset, which is what advances the leader's high watermark.
//
//	GROUPS_REPRO=1 go test ./test/groups -run TestReproAcksAllLatency -v
func TestReproAcksAllLatency(t *testing.T) {
	if os.Getenv("GROUPS_REPRO") == "" {
		t.Skip("set GROUPS_REPRO=1 to run")
	}
	c := startCluster(t)
	c.CreateTopic("lat3", 1, 3, nil, nil)
	c.CreateTopic("lat1", 1, 1, nil, nil)
	worst := map[string]time.Duration{}
	for _, tc := range []struct {
		name, topic string
		acks        kgo.Acks
	}{
		{"rf3 acks=all", "lat3", kgo.AllISRAcks()},
		{"rf3 acks=1", "lat3", kgo.LeaderAck()},
		{"rf1 acks=all", "lat1", kgo.AllISRAcks()},
	} {
		opts := []kgo.Opt{kgo.DefaultProduceTopic(tc.topic), kgo.RequiredAcks(tc.acks)}
		if tc.acks != kgo.AllISRAcks() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := c.Client(opts...)
		for i := range 5 {
			s := time.Now()
			if err := cl.ProduceSync(tctx(t, 10*time.Second), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			d := time.Since(s)
			t.Logf("%s: %v", tc.name, d)
			if i > 0 { // the first one includes connecting
				worst[tc.name] = max(worst[tc.name], d)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if w := worst["rf3 acks=all"]; w > 100*time.Millisecond {
		t.Errorf("acks=all on replication factor 3 took up to %v (acks=1: %v, rf 1: %v)", w, worst["rf3 acks=1"], worst["rf1 acks=all"])
	}
}
