package handler_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/metrics"
)

// setClientQuota sets key=value for a client id with kadm.
func setClientQuota(t *testing.T, cl *kgo.Client, clientID, key string, value float64) {
	t.Helper()
	res, err := kadm.NewClient(cl).AlterClientQuotas(ctx(t), []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &clientID}},
			Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: value}}}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas %s=%v for %s: %+v %v", key, value, clientID, res, err)
	}
}

// metadataThrottles sends up to n Metadata requests (counted by
// request_percentage) and returns how many responses carried a throttle
// time, stopping at the first.
func metadataThrottles(t *testing.T, cl *kgo.Client, n int) int {
	t.Helper()
	for i := 0; i < n; i++ {
		resp := request[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
		if resp.ThrottleMillis > 0 {
			if resp.ThrottleMillis > 1000 {
				t.Errorf("request throttle %d ms, more than one quota window", resp.ThrottleMillis)
			}
			return 1
		}
	}
	return 0
}

// request_percentage (KIP-124): a client id with a tiny quota gets a
// throttle time after a burst of requests; another client id, without a
// quota, never does; exempt requests (a follower's Fetch,
// WriteTxnMarkers, acks=0 Produce, SaslHandshake) are not counted: a
// burst of them under a tinier quota gives no throttle.
func TestRequestPercentageQuota(t *testing.T) {
	// 11 samples of 1 s: a quota of 0.001 % lets 0.1 ms of handling
	// through per 10 s, which 2,000 requests exceed on any machine (at
	// 0.05 %, 5 ms, a fast machine without the race detector handled
	// them within the quota).
	n := startNode(t, "", map[string]string{"quota.window.num": "11", "quota.window.size.seconds": "1"})
	adm := n.client()
	createTopic(t, adm, "rq", 1, nil)
	setClientQuota(t, adm, "busy", "request_percentage", 0.001)
	// 0.01 %: 1 ms per 10 s, which the exempt requests below would
	// exceed at once if they were counted (and which the few counted
	// ApiVersions of their connections stay within).
	setClientQuota(t, adm, "exempt", "request_percentage", 0.01)
	desc, err := kadm.NewClient(adm).DescribeClientQuotas(ctx(t), false, nil)
	if err != nil || len(desc) != 2 {
		t.Fatalf("DescribeClientQuotas: %+v %v", desc, err)
	}

	if got := metadataThrottles(t, n.client(kgo.ClientID("busy")), 2000); got == 0 {
		t.Error("client busy: no throttle after 2000 Metadata requests over a 0.001% request quota")
	}
	if got := metadataThrottles(t, n.client(kgo.ClientID("free")), 500); got != 0 {
		t.Error("client free, without a quota, was throttled")
	}

	// kgo sends a raw Produce with the client's acks.
	ex := n.client(kgo.ClientID("exempt"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	id := topicID(t, ex, "rq")
	exemptThrottled := 0
	exemptBurst := func(n int) {
		limit := time.Now().Add(20 * time.Second)
		for i := 0; i < n; i++ {
			if time.Now().After(limit) {
				t.Fatalf("exempt requests slowed down (muted?): %d of %d in 20 s", i*4, n*4)
			}
			f := fetchReq(id, "rq", 0, -1, map[int32]int64{0: 0})
			f.ReplicaID, f.ReplicaState.ID, f.ReplicaState.Epoch = 1, 1, -1
			if request[*kmsg.FetchResponse](t, ex, f).ThrottleMillis > 0 {
				exemptThrottled++
			}
			request[*kmsg.WriteTxnMarkersResponse](t, ex, kmsg.NewPtrWriteTxnMarkersRequest())
			request[*kmsg.SASLHandshakeResponse](t, ex, &kmsg.SASLHandshakeRequest{Mechanism: "PLAIN"})
			p := kmsg.NewPtrProduceRequest()
			p.Acks, p.TimeoutMillis = 0, 1000
			if _, err := ex.Request(ctx(t), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	// kgo opens a connection per kind of request, each starting with an
	// ApiVersions, which is counted (as in Kafka): open them first.
	exemptBurst(1)
	throttleSecs := func() float64 { return testutil.ToFloat64(metrics.QuotaThrottle.WithLabelValues("request")) }
	before := throttleSecs()
	start := time.Now()
	exemptBurst(300)
	t.Logf("1200 exempt requests in %v", time.Since(start))
	if exemptThrottled > 0 {
		t.Errorf("%d exempt responses carried a throttle time", exemptThrottled)
	}
	if d := throttleSecs() - before; d != 0 {
		t.Errorf("exempt requests were counted: %.3f s of request throttle given during them", d)
	}
}

// batchOffsets returns the offsets of the record batches in data.
func batchOffsets(t *testing.T, data []byte) (first, next int64, ok bool) {
	t.Helper()
	for len(data) > 0 {
		h, _, rest, err := batch.Next(data)
		if err != nil {
			t.Fatalf("parsing batches: %v", err)
		}
		if !ok {
			first, ok = h.BaseOffset, true
		}
		next = h.BaseOffset + int64(h.LastOffsetDelta) + 1
		data = rest
	}
	return first, next, ok
}

// A Fetch throttled by consumer_byte_rate carries no records (KIP-219,
// Kafka's getThrottledResponse): its response has ThrottleMillis > 0 and
// no partition data, the records come in later fetches, and none is
// skipped. The fetch's MaxBytes is capped to one quota window's bytes, so
// each unthrottled fetch fits in the quota.
func TestThrottledFetchCarriesNoRecords(t *testing.T) {
	const quota = 8 << 10 // bytes/s
	n := startNode(t, "", map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"})
	adm := n.client()
	createTopic(t, adm, "fq", 1, nil)
	setClientQuota(t, adm, "slowc", "consumer_byte_rate", quota)
	prod := n.client(kgo.DefaultProduceTopic("fq"), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const records = 30
	val := make([]byte, 1<<10)
	for i := 0; i < records; i++ {
		if err := prod.ProduceSync(ctx(t), &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	cl := n.client(kgo.ClientID("slowc"))
	id := topicID(t, cl, "fq")
	var offset int64
	throttled, fetches := 0, 0
	deadline := time.Now().Add(20 * time.Second)
	for offset < records && time.Now().Before(deadline) {
		resp := request[*kmsg.FetchResponse](t, cl, fetchReq(id, "fq", 0, -1, map[int32]int64{0: offset}))
		fetches++
		if resp.ThrottleMillis > 0 {
			throttled++
			if len(resp.Topics) != 0 {
				t.Fatalf("throttled fetch (%d ms) answered partitions: %+v", resp.ThrottleMillis, answered(resp))
			}
			continue
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch answered %+v", answered(resp))
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != records {
			t.Fatalf("partition error %d, high watermark %d", p.ErrorCode, p.HighWatermark)
		}
		if len(p.RecordBatches) > quota+2<<10 {
			t.Errorf("fetch returned %d bytes, more than a window of quota", len(p.RecordBatches))
		}
		first, next, ok := batchOffsets(t, p.RecordBatches)
		if !ok {
			continue
		}
		if first != offset {
			t.Fatalf("fetch at %d returned records from %d", offset, first)
		}
		offset = next
	}
	t.Logf("%d fetches, %d throttled, offset %d", fetches, throttled, offset)
	if offset != records {
		t.Fatalf("consumed up to %d of %d records", offset, records)
	}
	if throttled == 0 {
		t.Error("no fetch was throttled")
	}
}

// A franz-go consumer (incremental fetch sessions, KIP-227) under a
// small consumer_byte_rate gets throttled fetches and still reads every
// record once, in order: a throttled incremental fetch keeps its session
// and commits nothing to it.
func TestThrottledFetchConsumer(t *testing.T) {
	const quota = 8 << 10 // bytes/s
	n := startNode(t, "", map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"})
	adm := n.client()
	createTopic(t, adm, "fc", 1, nil)
	setClientQuota(t, adm, "slowc", "consumer_byte_rate", quota)
	prod := n.client(kgo.DefaultProduceTopic("fc"), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const records = 30
	for i := 0; i < records; i++ {
		if err := prod.ProduceSync(ctx(t), &kgo.Record{Value: make([]byte, 1<<10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var hook throttleHook
	cl := n.client(kgo.ClientID("slowc"), kgo.WithHooks(&hook), kgo.ConsumeTopics("fc"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	c := ctx(t)
	next := int64(0)
	for next < records {
		fs := cl.PollFetches(c)
		if err := c.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", next, records, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("record at offset %d, want %d", r.Offset, next)
			}
			next++
		})
	}
	t.Logf("%d records, %d throttled responses", next, hook.n.Load())
	if hook.n.Load() == 0 {
		t.Error("no fetch was throttled")
	}
}
