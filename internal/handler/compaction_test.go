package handler_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/clock"
)

// TestCompactedTopicWithFranzGo produces many versions of each key and
// some tombstones to a compacted topic with tiny segments and dirty ratio,
// lets the cleaner run, and reads it back with franz-go: every live key's
// latest value at its original offset, at most one record per key below
// the active segment, tombstoned keys gone after delete.retention.ms.
func TestCompactedTopicWithFranzGo(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, "", map[string]string{"log.cleaner.backoff.ms": "20"}, clk)
	cl := n.client()
	createTopic(t, cl, "changelog", 1, map[string]*string{"cleanup.policy": strp("compact"), "segment.bytes": strp("2048"),
		"min.cleanable.dirty.ratio": strp("0.01"), "delete.retention.ms": strp("300"), "segment.ms": strp("100")})
	const keys, versions = 20, 15
	latest := map[string]int64{}
	for v := 0; v < versions; v++ {
		var rs []*kgo.Record
		for k := 0; k < keys; k++ {
			r := &kgo.Record{Topic: "changelog", Key: []byte(fmt.Sprintf("key-%d", k)), Value: []byte(fmt.Sprintf("v%d", v))}
			if v == versions-1 && k%4 == 0 {
				r.Value = nil // delete every fourth key
			}
			rs = append(rs, r)
		}
		if err := cl.ProduceSync(ctx(t), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			latest[string(r.Key)] = r.Offset
		}
	}
	// A keyless record is refused and nothing of its batch appended.
	err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "changelog", Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record: %v, want INVALID_RECORD", err)
	}
	// Roll the last segment with a late record (segment.ms: by the
	// records' timestamps, so this one is stamped a second later), then
	// wait for the cleaner, moving the broker's clock past its backoff
	// and delete.retention.ms a step at a time.
	late := time.Now().Add(time.Second)
	if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "changelog", Key: []byte("roll"), Value: []byte("x"), Timestamp: late}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		clk.Advance(100 * time.Millisecond)
		recs := readAllRecords(t, n, "changelog")
		per := map[string]int{}
		ok := true
		for _, r := range recs {
			per[string(r.Key)]++
			if string(r.Key) != "roll" && r.Offset != latest[string(r.Key)] {
				ok = false // an older version still there
			}
			if r.Value == nil {
				ok = false // a tombstone not yet dropped
			}
		}
		for k, off := range latest {
			var kk int
			fmt.Sscanf(k, "key-%d", &kk)
			if kk%4 == 0 {
				continue
			}
			found := false
			for _, r := range recs {
				if string(r.Key) == k {
					found = found || r.Offset == off
				}
			}
			if !found {
				t.Fatalf("key %s lost its latest value at %d", k, off)
			}
		}
		if ok && len(recs) == keys-keys/4+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not compacted after 20 s: %d records, per key %v", len(recs), per)
		}
		time.Sleep(time.Millisecond)
	}
}

// readAllRecords reads partition 0 of topic from the start to its high
// watermark.
func readAllRecords(t *testing.T, n *node, topic string) []*kgo.Record {
	t.Helper()
	cl := n.client()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	hw := request[*kmsg.ListOffsetsResponse](t, cl, req).Topics[0].Partitions[0].Offset
	c := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	var out []*kgo.Record
	cx := ctx(t)
	for {
		fs := c.PollFetches(cx)
		if cx.Err() != nil {
			t.Fatalf("reading %s: %v", topic, cx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		for _, r := range fs.Records() {
			out = append(out, r)
			if r.Offset+1 >= hw {
				c.Close()
				return out
			}
		}
	}
}

// TestCompactionConfigValidation: compaction settings out of range, in
// conflict with each other, or a bad cleanup.policy element (also when
// appended to the list) get INVALID_CONFIG and change nothing, as from
// Kafka's LogConfig.
func TestCompactionConfigValidation(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	adm := kadm.NewClient(cl)
	for name, cfg := range map[string]map[string]*string{
		"ratio-above-1":    {"min.cleanable.dirty.ratio": strp("1.5")},
		"ratio-negative":   {"min.cleanable.dirty.ratio": strp("-0.1")},
		"negative-lag":     {"min.compaction.lag.ms": strp("-1")},
		"zero-max-lag":     {"max.compaction.lag.ms": strp("0")},
		"lags-in-conflict": {"min.compaction.lag.ms": strp("5000"), "max.compaction.lag.ms": strp("1000")},
		"bad-policy":       {"cleanup.policy": strp("compact,shred")},
	} {
		resp, err := adm.CreateTopics(ctx(t), 1, 1, cfg, "t-"+name)
		if err != nil {
			t.Fatal(err)
		}
		if err := resp["t-"+name].Err; !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("%s: %v, want INVALID_CONFIG", name, err)
		}
	}
	createTopic(t, cl, "valid", 1, map[string]*string{"cleanup.policy": strp("compact"), "max.compaction.lag.ms": strp("1000")})
	for name, op := range map[string]kadm.AlterConfig{
		"min-lag-above-max": {Op: kadm.SetConfig, Name: "min.compaction.lag.ms", Value: strp("2000")},
		"append-bad-policy": {Op: kadm.AppendConfig, Name: "cleanup.policy", Value: strp("shred")},
	} {
		resp, err := adm.AlterTopicConfigs(ctx(t), []kadm.AlterConfig{op}, "valid")
		if err != nil {
			t.Fatal(err)
		}
		if err := resp[0].Err; !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("%s: %v, want INVALID_CONFIG", name, err)
		}
	}
	rc, err := adm.DescribeTopicConfigs(ctx(t), "valid")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc[0].Configs {
		if (c.Key == "cleanup.policy" && c.MaybeValue() != "compact") || (c.Key == "min.compaction.lag.ms" && c.MaybeValue() != "0") {
			t.Fatalf("%s changed to %q", c.Key, c.MaybeValue())
		}
	}
}
