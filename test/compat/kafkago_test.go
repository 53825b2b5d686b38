package compat

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func kafkagoCodec(name string) kafka.Compression {
	switch name {
	case "gzip":
		return kafka.Gzip
	case "snappy":
		return kafka.Snappy
	case "lz4":
		return kafka.Lz4
	case "zstd":
		return kafka.Zstd
	}
	return 0
}

// produceKafkaGo writes w's records with a kafka-go Writer (acks=all,
// key-hash balancer) and returns where each was acked, from the Writer's
// Completion callback.
func produceKafkaGo(t *testing.T, addr, topic, codec string, w want) []msg {
	t.Helper()
	acked := make([]msg, w.N)
	var (
		mu      sync.Mutex
		cbErr   error
		nAcked  int
		badVals int
	)
	// A Transport per writer: kafka-go's shared DefaultTransport caches
	// metadata per address for MetadataTTL (6s), so a second writer to the
	// same broker would not see a topic created in between.
	tr := &kafka.Transport{DialTimeout: 5 * time.Second, ClientID: "sluice-compat-kafkago"}
	defer tr.CloseIdleConnections()
	wr := &kafka.Writer{
		Addr:         kafka.TCP(addr),
		Transport:    tr,
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		Compression:  kafkagoCodec(codec),
		BatchSize:    500,
		BatchTimeout: 5 * time.Millisecond,
		WriteTimeout: 15 * time.Second,
		ReadTimeout:  15 * time.Second,
		MaxAttempts:  3,
		Completion: func(ms []kafka.Message, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if cbErr == nil {
					cbErr = err
				}
				return
			}
			for _, m := range ms {
				i, ok := w.index(string(m.Value))
				if !ok {
					badVals++
					continue
				}
				nAcked++
				acked[i] = msg{Partition: int32(m.Partition), Offset: m.Offset}
			}
		},
	}
	defer wr.Close()
	msgs := make([]kafka.Message, w.N)
	for i := range msgs {
		m := kafka.Message{Value: []byte(w.value(i))}
		if k := w.key(i); k != "" {
			m.Key = []byte(k)
		}
		for _, h := range w.headers(i) {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: []byte(h.Value)})
		}
		msgs[i] = m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := wr.WriteMessages(ctx, msgs...); err != nil {
		if we, ok := err.(kafka.WriteErrors); ok {
			t.Fatalf("kafka-go WriteMessages: %d of %d failed; first: %v", we.Count(), len(msgs), firstNonNil(we))
		}
		t.Fatalf("kafka-go WriteMessages: %v", err)
	}
	if err := wr.Close(); err != nil {
		t.Fatalf("kafka-go Writer.Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if cbErr != nil || nAcked != w.N || badVals != 0 {
		t.Fatalf("kafka-go Completion: %d of %d acked, %d unknown values, error %v", nAcked, w.N, badVals, cbErr)
	}
	return acked
}

func firstNonNil(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// consumeKafkaGo reads every partition from its first offset up to the
// high watermark with a kafka-go partition Reader (no GroupID).
func consumeKafkaGo(t *testing.T, addr, topic string, n int) []msg {
	t.Helper()
	ends := endOffsets(t, addr, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := make([]msg, 0, n)
	for part, end := range ends {
		if end == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   []string{addr},
			Topic:     topic,
			Partition: int(part),
			MinBytes:  1,
			MaxBytes:  4 << 20,
			MaxWait:   200 * time.Millisecond,
			ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) {
				t.Logf("kafka-go reader: "+f, a...)
			}),
		})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			t.Fatalf("kafka-go SetOffset: %v", err)
		}
		for last := int64(-1); last < end-1; {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("kafka-go ReadMessage %s[%d] after offset %d (high watermark %d): %v", topic, part, last, end, err)
			}
			last = m.Offset
			g := msg{Partition: int32(m.Partition), Offset: m.Offset, Key: string(m.Key), Value: string(m.Value), Codec: -1}
			for _, h := range m.Headers {
				g.Headers = append(g.Headers, hdr{h.Key, string(h.Value)})
			}
			out = append(out, g)
		}
		if err := r.Close(); err != nil {
			t.Errorf("kafka-go Reader.Close: %v", err)
		}
	}
	return out
}

// TestKafkaGo: segmentio/kafka-go Writer (acks=all) with every codec,
// read back with a partition Reader and cross-checked with franz-go.
func TestKafkaGo(t *testing.T) {
	b := startBroker(t)
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			topic := uniqueTopic(t)
			createTopic(t, b.Addr(), topic, 3)
			w := want{N: 3000, Prefix: "kafkago-" + codec}
			acked := produceKafkaGo(t, b.Addr(), topic, codec, w)
			got := consumeKafkaGo(t, b.Addr(), topic, w.N)
			verify(t, w, got)
			checkAcked(t, w, acked, got)
			fr := consumeFranz(t, b.Addr(), topic, 3, w.N, 30*time.Second)
			verify(t, w, fr)
			checkCodec(t, fr, codec)
		})
	}
}
