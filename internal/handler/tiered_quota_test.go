package handler_test

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/metrics"
)

// TestTieredFetchQuota: with remote.log.manager.fetch.max.bytes.per.second
// exceeded (KIP-956), a fetch below the local log start answers that
// partition with no records and no error, while the request's other
// partition (local) answers its records; the remote reads and bytes are
// counted per topic (RemoteFetchRequestsPerSec, RemoteFetchBytesPerSec)
// and the throttled partition too.
func TestTieredFetchQuota(t *testing.T) {
	// 100 bytes/s over 11 one-second windows: one remote read of a
	// segment (about 3 KB) puts the rate over it for many seconds.
	tn := startTiered(t, map[string]string{"remote.log.manager.fetch.max.bytes.per.second": "100"})
	cl := tn.client()
	const topic = "tiered-quota"
	createTopic(t, cl, topic, 1, tieredConfigs())
	createTopic(t, cl, "local-quota", 1, nil)
	for i := 0; i < 200; i++ {
		if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte{'v'}, 50)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "local-quota", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tn.tier(t, topic)
	throttled0 := testutil.ToFloat64(metrics.RemoteFetchThrottled.WithLabelValues(topic))

	first := fetchRaw(t, tn, cl, topic, 0, 0, "")
	p := first.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("first remote fetch: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if n := testutil.ToFloat64(metrics.RemoteFetchBytes.WithLabelValues(topic)); n != float64(len(p.RecordBatches)) {
		t.Fatalf("sluice_remote_fetch_bytes_total{topic=%q} = %v, the fetch read %d", topic, n, len(p.RecordBatches))
	}
	if n := testutil.ToFloat64(metrics.RemoteFetchRequests.WithLabelValues(topic)); n != 1 {
		t.Fatalf("sluice_remote_fetch_requests_total = %v, want 1", n)
	}

	// Over the quota now: the remote partition is empty without an
	// error, the local one answers.
	second := fetchRaw(t, tn, cl, topic, 0, 0, "local-quota")
	for _, rt := range second.Topics {
		p := rt.Partitions[0]
		switch rt.Topic {
		case topic:
			if p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
				t.Fatalf("remote partition over the fetch quota: error %d, %d bytes (want none, no error)", p.ErrorCode, len(p.RecordBatches))
			}
		case "local-quota":
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				t.Fatalf("local partition: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
			}
		}
	}
	if n := testutil.ToFloat64(metrics.RemoteFetchThrottled.WithLabelValues(topic)) - throttled0; n != 1 {
		t.Fatalf("sluice_remote_fetch_throttled_total went up by %v, want 1", n)
	}
	if n := testutil.ToFloat64(metrics.RemoteFetchRequests.WithLabelValues(topic)); n != 1 {
		t.Fatalf("a throttled partition was read: sluice_remote_fetch_requests_total = %v", n)
	}
}
