package compat

import (
	"context"
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestFetchFromMidBatch: records stored in large compressed batches are
// read starting at an offset inside a batch. The broker returns whole
// batches; every client must then start exactly at the requested offset
// (records before it in the first batch are dropped client-side) and go
// on contiguously to the end.
func TestFetchFromMidBatch(t *testing.T) {
	b := startBroker(t)
	topic := uniqueTopic(t)
	createTopic(t, b.Addr(), topic, 1)
	w := want{N: 5000, Prefix: "midbatch"}
	acked := produceFranz(t, b.Addr(), topic, w, 30*time.Second,
		kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerLinger(50*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, a := range acked {
		if a.Partition != 0 || a.Offset != int64(i) {
			t.Fatalf("record %d acked at p%d@%d, want p0@%d", i, a.Partition, a.Offset, i)
		}
	}
	all := consumeFranz(t, b.Addr(), topic, 1, w.N, 30*time.Second)
	verify(t, w, all)
	const start = 1234
	base := firstBatchBase(t, b.Addr(), topic, start)
	t.Logf("Fetch at offset %d returns a batch starting at %d", start, base)
	if base >= start {
		t.Fatalf("raw Fetch at offset %d returned a first batch with base offset %d; want the batch containing %d (base < %d, records produced in large batches)", start, base, start, start)
	}

	// check verifies that got is exactly records start..N-1 in order.
	check := func(t *testing.T, got []msg) {
		t.Helper()
		if len(got) != w.N-start {
			t.Fatalf("got %d records from offset %d, want %d", len(got), start, w.N-start)
		}
		for j, m := range got {
			off := int64(start + j)
			if m.Offset != off || m.Value != w.value(int(off)) || m.Key != w.key(int(off)) {
				t.Fatalf("record #%d: offset %d value %q key %q, want offset %d value %q key %q",
					j, m.Offset, m.Value, m.Key, off, w.value(int(off)), w.key(int(off)))
			}
		}
	}

	t.Run("franz-go", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(start)}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var got []msg
		for len(got) < w.N-start {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("got %d of %d records before timeout", len(got), w.N-start)
			}
			fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch p%d: %v", p, err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, fromKgo(r)) })
		}
		check(t, got)
	})

	t.Run("sarama", func(t *testing.T) {
		c, err := sarama.NewConsumer([]string{b.Addr()}, saramaConfig(nil, "none"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pc, err := c.ConsumePartition(topic, 0, start)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var got []msg
		for len(got) < w.N-start {
			select {
			case m := <-pc.Messages():
				got = append(got, msg{Offset: m.Offset, Key: string(m.Key), Value: string(m.Value)})
			case err := <-pc.Errors():
				t.Fatalf("sarama: %v", err)
			case <-ctx.Done():
				t.Fatalf("sarama: got %d of %d records before timeout", len(got), w.N-start)
			}
		}
		check(t, got)
	})

	t.Run("kafka-go", func(t *testing.T) {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.Addr()}, Topic: topic, Partition: 0,
			MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 100 * time.Millisecond})
		defer r.Close()
		if err := r.SetOffset(start); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var got []msg
		for len(got) < w.N-start {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("kafka-go: after %d records: %v", len(got), err)
			}
			got = append(got, msg{Offset: m.Offset, Key: string(m.Key), Value: string(m.Value)})
		}
		check(t, got)
	})

	t.Run("kcat", func(t *testing.T) {
		kcat := testproc.RequireTool(t, "kcat")
		out := run(t, 20*time.Second, "", kcat, append(kcatBase(b.Addr()),
			"-C", "-t", topic, "-p", "0", "-o", strconv.Itoa(start), "-e", "-q", "-f", kcatFormat)...)
		check(t, parseKcat(t, out))
	})
}

// firstBatchBase sends a raw Fetch for partition 0 at offset and returns
// the base offset of the first record batch in the response.
func firstBatchBase(t *testing.T, addr, topic string, offset int64) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID(ctx, t, cl, topic) // by id from Fetch v13 (KIP-516)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("raw Fetch: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("raw Fetch: unexpected response shape %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("raw Fetch v%d at %d: error code %d", req.Version, offset, p.ErrorCode)
	}
	if len(p.RecordBatches) < 12 {
		t.Fatalf("raw Fetch v%d at %d: %d bytes of record batches, want at least one batch", req.Version, offset, len(p.RecordBatches))
	}
	return int64(binary.BigEndian.Uint64(p.RecordBatches[:8]))
}
