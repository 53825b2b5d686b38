package compat

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func saramaCodec(name string) sarama.CompressionCodec {
	switch name {
	case "gzip":
		return sarama.CompressionGZIP
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}

// saramaVersions are the protocol versions sarama is configured with: the
// library default (V2_8_0_0 in v1.61), V2_8_0_0 explicitly (flexible
// Produce v9 / Fetch v12 / Metadata v11) and V2_1_0_0, the default of
// 2023-2026 (non-flexible Produce v7 / Fetch v10 / Metadata v7).
var saramaVersions = []struct {
	name string
	v    *sarama.KafkaVersion
}{
	{"default", nil},
	{"V2_8_0_0", &sarama.V2_8_0_0},
	{"V2_1_0_0", &sarama.V2_1_0_0},
}

func saramaConfig(v *sarama.KafkaVersion, codec string) *sarama.Config {
	cfg := sarama.NewConfig()
	if v != nil {
		cfg.Version = *v
	}
	cfg.ClientID = "sluice-compat-sarama"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 15 * time.Second
	cfg.Net.WriteTimeout = 15 * time.Second
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = saramaCodec(codec)
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Flush.Frequency = 2 * time.Millisecond
	cfg.Producer.Timeout = 10 * time.Second
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 50 * time.Millisecond // Close waits out a pending long poll
	return cfg
}

func saramaMessage(topic string, w want, i int) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(w.value(i)), Metadata: i}
	if k := w.key(i); k != "" {
		m.Key = sarama.StringEncoder(k)
	}
	for _, h := range w.headers(i) {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: []byte(h.Value)})
	}
	return m
}

// produceSaramaSync sends w's records through a SyncProducer in chunks
// and returns where each was acked.
func produceSaramaSync(t *testing.T, addr, topic string, cfg *sarama.Config, w want) []msg {
	t.Helper()
	p, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			p.Close()
		}
	}()
	acked := make([]msg, w.N)
	const chunk = 250
	for lo := 0; lo < w.N; lo += chunk {
		var batch []*sarama.ProducerMessage
		for i := lo; i < min(lo+chunk, w.N); i++ {
			batch = append(batch, saramaMessage(topic, w, i))
		}
		if err := p.SendMessages(batch); err != nil {
			var pe sarama.ProducerErrors
			if errors.As(err, &pe) && len(pe) > 0 {
				t.Fatalf("sarama SendMessages: %d of %d failed; first: %v", len(pe), len(batch), pe[0].Err)
			}
			t.Fatalf("sarama SendMessages: %v", err)
		}
		for _, m := range batch {
			acked[m.Metadata.(int)] = msg{Partition: m.Partition, Offset: m.Offset}
		}
	}
	closed = true
	if err := p.Close(); err != nil {
		t.Fatalf("sarama SyncProducer.Close: %v", err)
	}
	return acked
}

// produceSaramaAsync sends w's records through an AsyncProducer and
// collects every success and error.
func produceSaramaAsync(t *testing.T, addr, topic string, cfg *sarama.Config, w want) []msg {
	t.Helper()
	p, err := sarama.NewAsyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewAsyncProducer: %v", err)
	}
	defer p.AsyncClose()
	acked := make([]msg, w.N)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		for i := range w.N {
			select {
			case p.Input() <- saramaMessage(topic, w, i):
			case <-ctx.Done():
				return
			}
		}
	}()
	var firstErr error
	nerr := 0
	for done := 0; done < w.N; done++ {
		select {
		case m := <-p.Successes():
			acked[m.Metadata.(int)] = msg{Partition: m.Partition, Offset: m.Offset}
		case pe := <-p.Errors():
			nerr++
			if firstErr == nil {
				firstErr = pe.Err
			}
		case <-ctx.Done():
			t.Fatalf("sarama AsyncProducer: %d of %d records answered before timeout", done, w.N)
		}
	}
	if nerr > 0 {
		t.Fatalf("sarama AsyncProducer: %d of %d records failed; first: %v", nerr, w.N, firstErr)
	}
	return acked
}

// consumeSarama reads every partition of topic from the oldest offset up
// to its high watermark with sarama's (group-less) partition consumer.
func consumeSarama(t *testing.T, addr, topic string, cfg *sarama.Config, n int) []msg {
	t.Helper()
	ends := endOffsets(t, addr, topic)
	c, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumer: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := make([]msg, 0, n)
	for part, end := range ends {
		if end == 0 {
			continue
		}
		pc, err := c.ConsumePartition(topic, part, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama ConsumePartition(%s, %d): %v", topic, part, err)
		}
		for last := int64(-1); last < end-1; {
			select {
			case m := <-pc.Messages():
				last = m.Offset
				g := msg{Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value), Codec: -1}
				for _, h := range m.Headers {
					g.Headers = append(g.Headers, hdr{string(h.Key), string(h.Value)})
				}
				out = append(out, g)
			case err := <-pc.Errors():
				t.Fatalf("sarama partition consumer %s[%d]: %v", topic, part, err)
			case <-ctx.Done():
				t.Fatalf("sarama consumer %s[%d]: reached offset %d of %d before timeout", topic, part, last, end-1)
			}
		}
		pc.Close()
	}
	return out
}

// TestSaramaSyncProducer: SyncProducer with every codec and protocol
// version, read back with sarama's partition consumer and cross-checked
// with franz-go (offsets and the codec of the stored batches).
func TestSaramaSyncProducer(t *testing.T) {
	b := startBroker(t)
	for _, ver := range saramaVersions {
		for _, codec := range codecs {
			t.Run(ver.name+"/"+codec, func(t *testing.T) {
				cfg := saramaConfig(ver.v, codec)
				if ver.v == nil {
					t.Logf("sarama default Version = %s", cfg.Version)
				}
				topic := uniqueTopic(t)
				createTopic(t, b.Addr(), topic, 3)
				w := want{N: 1000, Prefix: fmt.Sprintf("sarama-sync-%s-%s", ver.name, codec)}
				acked := produceSaramaSync(t, b.Addr(), topic, cfg, w)
				got := consumeSarama(t, b.Addr(), topic, cfg, w.N)
				verify(t, w, got)
				checkAcked(t, w, acked, got)
				fr := consumeFranz(t, b.Addr(), topic, 3, w.N, 30*time.Second)
				verify(t, w, fr)
				checkCodec(t, fr, codec)
				checkProducerIDs(t, fr, false)
			})
		}
	}
}

// TestSaramaAsyncProducer: AsyncProducer (library default version) with
// every codec.
func TestSaramaAsyncProducer(t *testing.T) {
	b := startBroker(t)
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			cfg := saramaConfig(nil, codec)
			topic := uniqueTopic(t)
			createTopic(t, b.Addr(), topic, 3)
			w := want{N: 3000, Prefix: "sarama-async-" + codec}
			acked := produceSaramaAsync(t, b.Addr(), topic, cfg, w)
			got := consumeSarama(t, b.Addr(), topic, cfg, w.N)
			verify(t, w, got)
			checkAcked(t, w, acked, got)
			checkEnd(t, b.Addr(), topic, w.N)
		})
	}
}

// TestSaramaIdempotent: Producer.Idempotent with MaxOpenRequests=1 and
// acks=all (InitProducerId, producer id/epoch/sequence in every batch),
// with every codec, through both producer kinds.
func TestSaramaIdempotent(t *testing.T) {
	b := startBroker(t)
	for _, kind := range []string{"sync", "async"} {
		for _, codec := range codecs {
			t.Run(kind+"/"+codec, func(t *testing.T) {
				cfg := saramaConfig(nil, codec)
				cfg.Producer.Idempotent = true
				cfg.Net.MaxOpenRequests = 1
				cfg.Producer.RequiredAcks = sarama.WaitForAll
				cfg.Producer.Retry.Max = 5
				topic := uniqueTopic(t)
				createTopic(t, b.Addr(), topic, 3)
				w := want{N: 2000, Prefix: "sarama-idem-" + kind + "-" + codec}
				var acked []msg
				if kind == "sync" {
					acked = produceSaramaSync(t, b.Addr(), topic, cfg, w)
				} else {
					acked = produceSaramaAsync(t, b.Addr(), topic, cfg, w)
				}
				got := consumeSarama(t, b.Addr(), topic, cfg, w.N)
				verify(t, w, got)
				checkAcked(t, w, acked, got)
				fr := consumeFranz(t, b.Addr(), topic, 3, w.N, 30*time.Second)
				checkCodec(t, fr, codec)
				checkProducerIDs(t, fr, true)
			})
		}
	}
}
