package compat

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// codecNum is the record-batch attribute value of each codec.
var codecNum = map[string]int8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

func franzCodec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// produceFranz produces w's records to topic with a client built from
// opts (plus the seed), asynchronously, and checks every ack. It returns
// where each record landed, by index.
func produceFranz(t *testing.T, addr, topic string, w want, timeout time.Duration, opts ...kgo.Opt) []msg {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	acked := make([]msg, w.N)
	var (
		mu       sync.Mutex
		errs     []error
		firstErr error
	)
	for i := range w.N {
		r := &kgo.Record{Value: []byte(w.value(i))}
		if k := w.key(i); k != "" {
			r.Key = []byte(k)
		}
		for _, h := range w.headers(i) {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
		}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			acked[i] = msg{Partition: r.Partition, Offset: r.Offset}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("franz-go flush: %v", err)
	}
	if len(errs) > 0 {
		t.Fatalf("franz-go produce: %d of %d records failed; first error: %v", len(errs), w.N, firstErr)
	}
	return acked
}

// checkAcked compares the partition/offset each record was acked at with
// where the consumer found it.
func checkAcked(t *testing.T, w want, acked, got []msg) {
	t.Helper()
	bad := 0
	for _, m := range got {
		i, ok := w.index(m.Value)
		if !ok {
			continue
		}
		if a := acked[i]; a.Partition != m.Partition || a.Offset != m.Offset {
			bad++
			if bad <= 5 {
				t.Errorf("record %d acked at p%d@%d but consumed at p%d@%d", i, a.Partition, a.Offset, m.Partition, m.Offset)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d records consumed somewhere else than acked", bad)
	}
}

// checkCodec fails unless every consumed batch used the codec.
func checkCodec(t *testing.T, got []msg, codec string) {
	t.Helper()
	want := codecNum[codec]
	counts := map[int8]int{}
	for _, m := range got {
		counts[m.Codec]++
	}
	// A producer sends a batch uncompressed when compressing would not
	// shrink it (franz-go does, e.g. for a lone small record), so "none"
	// may appear; any other codec may not, and most records must carry
	// the requested one.
	for c := range counts {
		if c != want && c != 0 {
			t.Fatalf("batch compression codecs seen (codec: records) %v, want %d (%s)", counts, want, codec)
		}
	}
	if want != 0 && counts[want]*10 < len(got)*9 {
		t.Fatalf("batch compression codecs seen (codec: records) %v: under 90%% carry %d (%s)", counts, want, codec)
	}
}

// TestFranzDefaults100k: franz-go with its defaults (idempotent producer,
// snappy, sticky key partitioning) round-trips 100,000 records over three
// partitions.
func TestFranzDefaults100k(t *testing.T) {
	b := startBroker(t)
	topic := uniqueTopic(t)
	createTopic(t, b.Addr(), topic, 3)
	w := want{N: 100_000, Prefix: "franz-defaults"}

	start := time.Now()
	acked := produceFranz(t, b.Addr(), topic, w, 2*time.Minute)
	t.Logf("produced %d records in %v", w.N, time.Since(start).Round(time.Millisecond))
	perPart := map[int32]int{}
	for _, a := range acked {
		perPart[a.Partition]++
	}
	if len(perPart) != 3 {
		t.Fatalf("records went to partitions %v, want all of 0, 1, 2", perPart)
	}

	start = time.Now()
	got := consumeFranz(t, b.Addr(), topic, 3, w.N, 2*time.Minute)
	t.Logf("consumed %d records in %v (per partition %v)", len(got), time.Since(start).Round(time.Millisecond), perPart)
	verify(t, w, got)
	checkAcked(t, w, acked, got)
	checkCodec(t, got, "snappy")
	checkProducerIDs(t, got, true)
}

// TestFranzCodecs produces and consumes with each codec franz-go supports,
// idempotently (the default) and with idempotence disabled.
func TestFranzCodecs(t *testing.T) {
	b := startBroker(t)
	for _, codec := range codecs {
		for _, idem := range []bool{true, false} {
			name := codec
			if !idem {
				name += "/acks1-no-idempotence"
			}
			t.Run(name, func(t *testing.T) {
				topic := uniqueTopic(t)
				createTopic(t, b.Addr(), topic, 3)
				w := want{N: 3000, Prefix: "franz-" + codec}
				opts := []kgo.Opt{kgo.ProducerBatchCompression(franzCodec(codec))}
				if !idem {
					opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
				}
				acked := produceFranz(t, b.Addr(), topic, w, 30*time.Second, opts...)
				got := consumeFranz(t, b.Addr(), topic, 3, w.N, 30*time.Second)
				verify(t, w, got)
				checkAcked(t, w, acked, got)
				checkCodec(t, got, codec)
				checkProducerIDs(t, got, idem)
			})
		}
	}
}

// TestFranzNoKeysNoHeaders: keyless records spread over partitions by the
// sticky partitioner, empty header lists, one larger value per batch.
func TestFranzNoKeysNoHeaders(t *testing.T) {
	b := startBroker(t)
	topic := uniqueTopic(t)
	createTopic(t, b.Addr(), topic, 3)
	w := want{N: 5000, Prefix: "franz-nokeys", NoKeys: true, NoHeaders: true}
	acked := produceFranz(t, b.Addr(), topic, w, 30*time.Second,
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(5*time.Millisecond))
	got := consumeFranz(t, b.Addr(), topic, 3, w.N, 30*time.Second)
	verify(t, w, got)
	checkAcked(t, w, acked, got)
}
