package handler_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/clock"
)

func createTopic(t *testing.T, cl *kgo.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopics(ctx(t), partitions, 1, configs, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp[name].Err; err != nil {
		t.Fatal(err)
	}
}

// consume reads n records from topic (all partitions) from the start.
func consume(t *testing.T, n *node, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	var out []*kgo.Record
	c := ctx(t)
	for len(out) < want {
		fs := cl.PollFetches(c)
		if c.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", len(out), want, c.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestProduceConsumeEveryCodec(t *testing.T) {
	n := startNode(t, "", nil)
	names := []string{"none", "gzip", "snappy", "lz4", "zstd"}
	for i, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		topic := fmt.Sprintf("codec-%s", names[i])
		t.Run(topic, func(t *testing.T) {
			cl := n.client(kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
			const N = 500
			for i := 0; i < N; i++ {
				r := &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i)),
					Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}}
				cl.Produce(ctx(t), r, func(r *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := cl.Flush(ctx(t)); err != nil {
				t.Fatal(err)
			}
			got := consume(t, n, topic, N)
			for i, r := range got {
				if r.Offset != int64(i) || string(r.Value) != "v"+strconv.Itoa(i) || string(r.Key) != "k"+strconv.Itoa(i) ||
					len(r.Headers) != 1 || string(r.Headers[0].Value) != strconv.Itoa(i) {
					t.Fatalf("record %d: offset %d key %q value %q headers %v", i, r.Offset, r.Key, r.Value, r.Headers)
				}
			}
		})
	}
}

// TestLongPollWakesOnProduce: a consumer's long poll stays parked while
// there is no data, and a produce wakes it. The broker runs on a manual
// clock: once the poll is parked with its timer armed
// (Partition.ParkedUntil), the clock moves 9 of its 10 s, and the timer
// still armed past the clock's now is a fact, not a guess after a sleep:
// the poll has not timed out, and its answer can only come from the
// produce.
func TestLongPollWakesOnProduce(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, "", nil, clk)
	cl := n.client()
	createTopic(t, cl, "poll", 1, nil)
	id := topicID(t, cl, "poll")
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 10000
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "poll"
		rt.TopicID = id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx(t), n.client())
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	p, err := n.b.Partition("poll", 0)
	if err != nil {
		t.Fatal(err)
	}
	until := awaitParked(t, p, done)
	if want := clk.Now().Add(10 * time.Second); !until.Equal(want) {
		t.Fatalf("long poll of 10 s parked until %v, want %v", until, want)
	}
	clk.Advance(9 * time.Second) // short of its 10 s wait
	stillParked(t, clk, p, done, "9 s into a 10 s long poll with no data")
	if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "poll", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-done:
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != 1 {
			t.Fatalf("%+v", p)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long poll never returned")
	}
}

// produceRaw sends one partition's records with acks=-1.
func produceRaw(t *testing.T, cl *kgo.Client, topic string, partition int32, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.ProduceResponse](t, cl, req)
	return resp.Topics[0].Partitions[0]
}

func TestIdempotentProducerState(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	createTopic(t, cl, "idem", 1, nil)
	b := func(seq int32, epoch int16, vals ...string) []byte {
		return batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 5000, ProducerEpoch: epoch, BaseSequence: seq}, batchtest.Values(vals...))
	}
	first := produceRaw(t, cl, "idem", 0, b(0, 0, "a", "b"))
	if first.ErrorCode != 0 || first.BaseOffset != 0 {
		t.Fatalf("%+v", first)
	}
	if r := produceRaw(t, cl, "idem", 0, b(2, 0, "c")); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("%+v", r)
	}
	// A retry of the first batch gets its original offsets and appends nothing.
	if r := produceRaw(t, cl, "idem", 0, b(0, 0, "a", "b")); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("duplicate: %+v", r)
	}
	if r := produceRaw(t, cl, "idem", 0, b(7, 0, "gap")); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %+v", r)
	}
	if r := produceRaw(t, cl, "idem", 0, b(0, 1, "new epoch")); r.ErrorCode != 0 || r.BaseOffset != 3 {
		t.Fatalf("new epoch: %+v", r)
	}
	if r := produceRaw(t, cl, "idem", 0, b(1, 0, "old epoch")); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: %+v", r)
	}
	got := consume(t, n, "idem", 4)
	want := []string{"a", "b", "c", "new epoch"}
	for i, r := range got {
		if string(r.Value) != want[i] || r.Offset != int64(i) {
			t.Fatalf("record %d = %q@%d", i, r.Value, r.Offset)
		}
	}
}

func TestBadBatches(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	small := "100"
	createTopic(t, cl, "bad", 1, map[string]*string{"max.message.bytes": &small})
	createTopic(t, cl, "bad2", 1, nil)
	segSmall := "200"
	createTopic(t, cl, "seg", 1, map[string]*string{"segment.bytes": &segSmall})
	good := func() []byte { return batchtest.Build(batchtest.Options{Codec: batch.Gzip}, batchtest.Values("hello")) }
	corruptCRC := good()
	corruptCRC[len(corruptCRC)-1] ^= 0xff
	garbage := good()
	for i := batch.HeaderSize; i < len(garbage); i++ {
		garbage[i] = 0xAB
	}
	crc := batch.ComputeCRC(garbage)
	garbage[17], garbage[18], garbage[19], garbage[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	twoBatches := append(good(), good()...)
	oldMagic := good()
	oldMagic[16] = 1
	big := batchtest.Build(batchtest.Options{}, batchtest.Values(string(make([]byte, 200))))
	cases := []struct {
		name  string
		topic string
		recs  []byte
		want  *kerr.Error
	}{
		{"corrupt crc", "bad2", corruptCRC, kerr.CorruptMessage},
		{"garbage inside compressed batch", "bad2", garbage, kerr.CorruptMessage},
		{"two batches", "bad2", twoBatches, kerr.InvalidRecord},
		{"old magic", "bad2", oldMagic, kerr.UnsupportedForMessageFormat},
		{"empty", "bad2", []byte{}, kerr.InvalidRecord},
		{"truncated", "bad2", good()[:40], kerr.CorruptMessage},
		{"too large for topic", "bad", big, kerr.MessageTooLarge},
		{"larger than a segment", "seg", big, kerr.RecordListTooLarge},
		{"unknown topic", "nope", good(), kerr.UnknownTopicOrPartition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := produceRaw(t, cl, tc.topic, 0, tc.recs)
			if r.ErrorCode != tc.want.Code {
				t.Fatalf("error %v, want %v", kerr.ErrorForCode(r.ErrorCode), tc.want)
			}
		})
	}
	// Nothing bad was stored: the log is still empty and serves fine.
	if r := produceRaw(t, cl, "bad2", 0, good()); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("%+v", r)
	}
	if r := produceRaw(t, cl, "bad", 0, batchtest.Build(batchtest.Options{}, batchtest.Values("ok"))); r.ErrorCode != 0 {
		t.Fatalf("%+v", r)
	}
	// The batch larger than segment.bytes was refused before the replica
	// machine counted it: the partition still appends at offset 0, and a
	// real producer gets the error for a big record and success after it.
	if r := produceRaw(t, cl, "seg", 0, good()); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("after a batch larger than a segment: %+v", r)
	}
	pr := n.client(kgo.DefaultProduceTopic("seg"), kgo.RecordRetries(1), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pr.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 300)}).FirstErr(); !errors.Is(err, kerr.RecordListTooLarge) {
		t.Fatalf("franz-go producing a record larger than segment.bytes: %v, want RECORD_LIST_TOO_LARGE", err)
	}
	r, err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte("fits")}).First()
	if err != nil || r.Offset != 1 {
		t.Fatalf("small record after the refused one: offset %v err %v", r, err)
	}
}
