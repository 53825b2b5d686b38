package compat

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testproc"
)

// fetchBatchHeaders reads partition 0 of topic from offset 0 with raw
// Fetch requests (no client decoding) and returns every stored batch
// header, records left undecoded.
func fetchBatchHeaders(t *testing.T, addr, topic string, end int64) []kmsg.RecordBatch {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := topicID(ctx, t, cl, topic)
	var out []kmsg.RecordBatch
	for next := int64(0); next < end; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 100
		req.MaxBytes = 4 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id // by id from Fetch v13 (KIP-516)
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset = next
		rp.PartitionMaxBytes = 4 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("raw Fetch at %d: %v", next, err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("raw Fetch at %d: error code %d", next, p.ErrorCode)
		}
		rest := p.RecordBatches
		n := 0
		for len(rest) >= 12 {
			size := 12 + int(int32(binary.BigEndian.Uint32(rest[8:])))
			if size > len(rest) {
				break // a partial batch at the end of the response
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(rest[:size]); err != nil {
				t.Fatalf("raw Fetch at %d: %v", next, err)
			}
			out = append(out, b)
			next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
			rest = rest[size:]
			n++
		}
		if n == 0 {
			t.Fatalf("raw Fetch at %d: no whole batch in %d bytes", next, len(p.RecordBatches))
		}
	}
	return out
}

// checkStoredCodec fails unless every stored batch of topic has codec
// (the attributes' low bits) and the producer id.
func checkStoredCodec(t *testing.T, addr, topic string, n int, codec string, idempotent bool) {
	t.Helper()
	batches := fetchBatchHeaders(t, addr, topic, int64(n))
	for _, b := range batches {
		if c := int8(b.Attributes & 7); c != codecNum[codec] {
			t.Fatalf("stored batch at %d: attributes %#x (codec %d), want %s (%d)", b.FirstOffset, b.Attributes, c, codec, codecNum[codec])
		}
		if (b.ProducerID >= 0) != idempotent {
			t.Fatalf("stored batch at %d: producer id %d", b.FirstOffset, b.ProducerID)
		}
	}
	t.Logf("%s: %d records in %d %s batches", topic, n, len(batches), codec)
}

// TestCompressionTypeFranz: franz-go (idempotent, snappy) produces to a
// topic with compression.type=gzip over TCP to a real sluice process; the
// stored batches are gzip (raw Fetch), and a franz-go consumer gets every
// record back with its key, value, headers and timestamp.
func TestCompressionTypeFranz(t *testing.T) {
	p := startBroker(t)
	topic := uniqueTopic(t)
	gz := "gzip"
	createTopicWithConfigs(t, p.Addr(), topic, map[string]*string{"compression.type": &gz})

	const n = 3000
	w := want{N: n, Prefix: "compression-type"}
	base := time.Now().Add(-30 * time.Minute).Truncate(time.Millisecond)
	ts := func(i int) time.Time { return base.Add(time.Duration(i*7) * time.Millisecond) }
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerBatchMaxBytes(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		r := &kgo.Record{Key: []byte(w.key(i)), Value: []byte(w.value(i)), Timestamp: ts(i)}
		for _, h := range w.headers(i) {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
		}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	got := consumeRecords(t, p.Addr(), topic, n)
	var ms []msg
	for _, r := range got {
		m := fromKgo(r)
		ms = append(ms, m)
		i, ok := w.index(m.Value)
		if !ok {
			continue // verify reports it
		}
		if !r.Timestamp.Equal(ts(i)) || r.Attrs.TimestampType() != 0 {
			t.Fatalf("record %d: timestamp %v (type %d), want %v (CreateTime)", i, r.Timestamp, r.Attrs.TimestampType(), ts(i))
		}
	}
	verify(t, w, ms)
	checkCodec(t, ms, "gzip")
	checkProducerIDs(t, ms, true)
	checkStoredCodec(t, p.Addr(), topic, n, "gzip", true)
}

// TestCompressionTypeKcat: kcat (librdkafka) reads batches the broker
// rebuilt in every codec, and its snappy produce (or its uncompressed
// fallback, see TestKcat) to a zstd topic is stored as zstd.
func TestCompressionTypeKcat(t *testing.T) {
	kcat := testproc.RequireTool(t, "kcat")
	p := startBroker(t)
	for _, codec := range codecs {
		typ := codec
		if typ == "none" {
			typ = "uncompressed"
		}
		t.Run(typ, func(t *testing.T) {
			topic := uniqueTopic(t)
			createTopicWithConfigs(t, p.Addr(), topic, map[string]*string{"compression.type": &typ})
			from := "zstd"
			if codec == "zstd" {
				from = "gzip"
			}
			w := want{N: 2000, Prefix: "kcat-compression-" + codec}
			produceFranz(t, p.Addr(), topic, w, 30*time.Second, kgo.ProducerBatchCompression(franzCodec(from)))
			checkStoredCodec(t, p.Addr(), topic, w.N, codec, true)
			out := run(t, 20*time.Second, "", kcat, append(kcatBase(p.Addr()),
				"-C", "-t", topic, "-e", "-q", "-o", "beginning", "-f", kcatFormat)...)
			verify(t, w, parseKcat(t, out))
		})
	}
	t.Run("kcat-produce", func(t *testing.T) {
		topic := uniqueTopic(t)
		zstd := "zstd"
		createTopicWithConfigs(t, p.Addr(), topic, map[string]*string{"compression.type": &zstd})
		w := want{N: 2000, Prefix: "kcat-produce-zstd", ConstHeaders: true}
		kcatProduce(t, kcat, p.Addr(), topic, "snappy", w, "-p", "0")
		fr := consumeFranz(t, p.Addr(), topic, 1, w.N, 30*time.Second)
		verify(t, w, fr)
		checkCodec(t, fr, "zstd")
		checkStoredCodec(t, p.Addr(), topic, w.N, "zstd", false)
	})
}
