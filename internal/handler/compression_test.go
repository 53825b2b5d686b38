package handler_test

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
)

// compressionRecords have keys (one null), values (one null), headers and
// timestamp deltas, so a rebuild that loses any of them shows.
func compressionRecords() []batchtest.Record {
	var recs []batchtest.Record
	for i := range 20 {
		recs = append(recs, batchtest.Record{
			Key:            fmt.Appendf(nil, "k%d", i),
			Value:          bytes.Repeat(fmt.Appendf(nil, "value-%d;", i), 20),
			TimestampDelta: int64(i * 3),
			Headers:        []kmsg.Header{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}, {Key: "empty"}},
		})
	}
	recs[0].Key = nil
	recs[1].Value = nil
	return recs
}

// sameRecords fails unless stored (a fetched batch) holds exactly the
// records and header fields of sent (the produced batch) in codec want:
// rebuilt uncompressed, both are the same bytes from the magic byte on
// (the base offset and leader epoch are the broker's).
func sameRecords(t *testing.T, stored, sent []byte, want batch.Codec) batch.Header {
	t.Helper()
	h, err := batch.Validate(stored)
	if err != nil {
		t.Fatalf("stored batch does not validate: %v", err)
	}
	if h.Compression() != want {
		t.Fatalf("stored codec %v, want %v", h.Compression(), want)
	}
	a, _, _, err1 := batch.Rebuild(stored, batch.None, 0, nil)
	b, _, _, err2 := batch.Rebuild(sent, batch.None, 0, nil)
	if err1 != nil || err2 != nil || !bytes.Equal(a[16:], b[16:]) {
		t.Fatalf("stored records or header fields differ from the produced ones (%v, %v)", err1, err2)
	}
	return h
}

func TestCompressionTypeZstdIdempotent(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	createTopic(t, cl, "z", 1, map[string]*string{"compression.type": strp("zstd")})
	mk := func(seq int32, recs []batchtest.Record) []byte {
		return batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 900, ProducerEpoch: 2, BaseSequence: seq}, recs)
	}
	recs := compressionRecords()
	sent := mk(0, recs)
	first := produceRaw(t, cl, "z", 0, append([]byte(nil), sent...))
	if first.ErrorCode != 0 || first.BaseOffset != 0 {
		t.Fatalf("first: %+v", first)
	}
	stored := fetchBatches(t, cl, "z")
	if len(stored) != 1 {
		t.Fatalf("%d batches stored", len(stored))
	}
	h := sameRecords(t, stored[0], sent, batch.Zstd)
	if h.ProducerID != 900 || h.ProducerEpoch != 2 || h.BaseSequence != 0 || h.NumRecords != 20 || h.LogAppendTime() {
		t.Fatalf("stored header %+v", h)
	}
	if len(stored[0]) >= len(sent) {
		t.Fatalf("zstd batch of %d bytes for %d uncompressed", len(stored[0]), len(sent))
	}

	// A retry is answered as a duplicate with the original offsets, and
	// nothing is appended: the next sequence lands right after.
	if dup := produceRaw(t, cl, "z", 0, mk(0, recs)); dup.ErrorCode != 0 || dup.BaseOffset != 0 {
		t.Fatalf("retry: %+v, want offset 0", dup)
	}
	next := mk(20, batchtest.Values("next"))
	if r := produceRaw(t, cl, "z", 0, append([]byte(nil), next...)); r.ErrorCode != 0 || r.BaseOffset != 20 {
		t.Fatalf("next sequence: %+v, want offset 20", r)
	}
	if r := produceRaw(t, cl, "z", 0, mk(40, batchtest.Values("gap"))); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %+v", r)
	}
	stored = fetchBatches(t, cl, "z")
	if len(stored) != 2 {
		t.Fatalf("%d batches stored, want 2", len(stored))
	}
	sameRecords(t, stored[1], next, batch.Zstd)

	// A consumer (franz-go's own zstd decoder) reads the records back.
	got := consume(t, n, "z", 21)
	for i, r := range got[:20] {
		want := recs[i]
		if r.Offset != int64(i) || !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) ||
			!bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) ||
			len(r.Headers) != 2 || string(r.Headers[0].Value) != strconv.Itoa(i) || r.Headers[1].Key != "empty" {
			t.Fatalf("record %d: %+v", i, r)
		}
		if r.Timestamp.UnixMilli() != got[0].Timestamp.UnixMilli()+int64(3*i) || r.ProducerID != 900 {
			t.Fatalf("record %d: timestamp %v producer %d", i, r.Timestamp, r.ProducerID)
		}
	}
}

func TestCompressionTypeUncompressed(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	createTopic(t, cl, "u", 1, map[string]*string{"compression.type": strp("uncompressed")})
	sent := batchtest.Build(batchtest.Options{Codec: batch.Gzip}, compressionRecords())
	if r := produceRaw(t, cl, "u", 0, append([]byte(nil), sent...)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("%+v", r)
	}
	stored := fetchBatches(t, cl, "u")
	sameRecords(t, stored[0], sent, batch.None)
	// Uncompressed, the stored batch is exactly what the producer's would
	// have been without gzip.
	plain := batchtest.Build(batchtest.Options{BaseTimestamp: func() int64 { h, _ := batch.ParseHeader(sent); return h.BaseTimestamp }()}, compressionRecords())
	if !bytes.Equal(stored[0][16:], plain[16:]) {
		t.Fatal("stored batch is not the uncompressed batch")
	}
}

func TestCompressionTypeMatchingCodecKeptAsIs(t *testing.T) {
	n := startNode(t, "", map[string]string{"compression.type": "lz4"}) // the broker default
	cl := n.client()
	createTopic(t, cl, "dflt", 1, nil)
	createTopic(t, cl, "prod", 1, map[string]*string{"compression.type": strp("producer")})
	createTopic(t, cl, "none", 1, map[string]*string{"compression.type": strp("uncompressed")})
	for _, c := range []struct {
		topic string
		codec batch.Codec
	}{{"dflt", batch.LZ4}, {"prod", batch.Snappy}, {"none", batch.None}} {
		sent := batchtest.Build(batchtest.Options{Codec: c.codec}, compressionRecords())
		if r := produceRaw(t, cl, c.topic, 0, append([]byte(nil), sent...)); r.ErrorCode != 0 {
			t.Fatalf("%s: %+v", c.topic, r)
		}
		if got := fetchBatches(t, cl, c.topic)[0]; !bytes.Equal(got[16:], sent[16:]) {
			t.Fatalf("%s: %v batch not stored byte for byte", c.topic, c.codec)
		}
	}
	// The broker default applies to a topic that does not set it.
	sent := batchtest.Build(batchtest.Options{Codec: batch.Gzip}, compressionRecords())
	if r := produceRaw(t, cl, "dflt", 0, append([]byte(nil), sent...)); r.ErrorCode != 0 || r.BaseOffset != 20 {
		t.Fatalf("%+v", r)
	}
	sameRecords(t, fetchBatches(t, cl, "dflt")[1], sent, batch.LZ4)
}

// TestCompressionTypeEveryCodec produces with one codec to a topic of
// every other and reads back with franz-go, whose decoders are not
// sluice's.
func TestCompressionTypeEveryCodec(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	types := map[string]batch.Codec{"uncompressed": batch.None, "gzip": batch.Gzip, "snappy": batch.Snappy, "lz4": batch.LZ4, "zstd": batch.Zstd}
	for typ, want := range types {
		createTopic(t, cl, "to-"+typ, 1, map[string]*string{"compression.type": strp(typ)})
		var sent [][]byte
		for _, from := range []batch.Codec{batch.None, batch.Gzip, batch.Snappy, batch.LZ4, batch.Zstd} {
			b := batchtest.Build(batchtest.Options{Codec: from}, compressionRecords())
			sent = append(sent, b)
			if r := produceRaw(t, cl, "to-"+typ, 0, append([]byte(nil), b...)); r.ErrorCode != 0 {
				t.Fatalf("%v to %s: %v", from, typ, kerr.ErrorForCode(r.ErrorCode))
			}
		}
		for i, b := range fetchBatches(t, cl, "to-"+typ) {
			sameRecords(t, b, sent[i], want)
		}
		recs := compressionRecords()
		for _, r := range consume(t, n, "to-"+typ, 100) {
			w := recs[r.Offset%20]
			if !bytes.Equal(r.Value, w.Value) || !bytes.Equal(r.Key, w.Key) || len(r.Headers) != 2 {
				t.Fatalf("%s: record %d: %+v", typ, r.Offset, r)
			}
		}
	}
}

func TestCompressionTypeWithTimestampsAndLimits(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	createTopic(t, cl, "lat", 1, map[string]*string{"compression.type": strp("gzip"), "message.timestamp.type": strp("LogAppendTime")})
	createTopic(t, cl, "bounded", 1, map[string]*string{"compression.type": strp("zstd"), "message.timestamp.before.max.ms": strp("3600000")})
	createTopic(t, cl, "small", 1, map[string]*string{"compression.type": strp("uncompressed"), "max.message.bytes": strp("300")})
	createTopic(t, cl, "seg", 1, map[string]*string{"compression.type": strp("uncompressed"), "segment.bytes": strp("300")})
	createTopic(t, cl, "zseg", 1, map[string]*string{"compression.type": strp("zstd"), "segment.bytes": strp("300")})

	// LogAppendTime is stamped on the rebuilt batch, under its CRC.
	sent := batchtest.Build(batchtest.Options{BaseTimestamp: y2001}, compressionRecords())
	lo := time.Now().UnixMilli()
	r := produceRaw(t, cl, "lat", 0, append([]byte(nil), sent...))
	hi := time.Now().UnixMilli()
	if r.ErrorCode != 0 || !window(r.LogAppendTime, lo, hi) {
		t.Fatalf("%+v", r)
	}
	stored := fetchBatches(t, cl, "lat")[0]
	h, err := batch.Validate(stored)
	if err != nil || h.Compression() != batch.Gzip || !h.LogAppendTime() || h.MaxTimestamp != r.LogAppendTime || h.BaseTimestamp != y2001 {
		t.Fatalf("stored %+v (%v), response time %d", h, err, r.LogAppendTime)
	}
	for _, rec := range consume(t, n, "lat", 20) {
		if rec.Timestamp.UnixMilli() != r.LogAppendTime || rec.Attrs.TimestampType() != 1 {
			t.Fatalf("record %d: %v type %d", rec.Offset, rec.Timestamp, rec.Attrs.TimestampType())
		}
	}

	// Refusals on the rebuild path: timestamps, transactional, corrupt.
	old := batchtest.Build(batchtest.Options{Codec: batch.Snappy, BaseTimestamp: y2001}, batchtest.Values("old"))
	if r := produceRaw(t, cl, "bounded", 0, old); r.ErrorCode != kerr.InvalidTimestamp.Code {
		t.Fatalf("record from 2001: %+v", r)
	}
	txn := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 1}, batchtest.Values("t"))
	txn[22] |= 0x10
	crc := batch.ComputeCRC(txn)
	txn[17], txn[18], txn[19], txn[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	// Without a transactional id in the request (KafkaApis.handleProduceRequest).
	if r := produceRaw(t, cl, "bounded", 0, txn); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional: %+v", r)
	}
	bad := batchtest.Build(batchtest.Options{}, batchtest.Values("x"))
	bad[len(bad)-1] ^= 0xff
	if r := produceRaw(t, cl, "bounded", 0, bad); r.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("corrupt: %+v", r)
	}
	if r := produceRaw(t, cl, "bounded", 0, batchtest.Build(batchtest.Options{}, batchtest.Values("ok"))); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("after refusals: %+v", r)
	}

	// Sizes are checked again after the rebuild: 1000 zero bytes gzip to
	// far less than 300 but not once uncompressed.
	zeros := batchtest.Build(batchtest.Options{Codec: batch.Gzip}, batchtest.Values(string(make([]byte, 1000))))
	if len(zeros) >= 300 {
		t.Fatalf("test batch of %d bytes", len(zeros))
	}
	if r := produceRaw(t, cl, "small", 0, append([]byte(nil), zeros...)); r.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("uncompressed beyond max.message.bytes: %+v", r)
	}
	if r := produceRaw(t, cl, "seg", 0, append([]byte(nil), zeros...)); r.ErrorCode != kerr.RecordListTooLarge.Code {
		t.Fatalf("uncompressed beyond segment.bytes: %+v", r)
	}
	// A batch beyond segment.bytes that fits once rebuilt is accepted, as
	// in Kafka (which checks segment.bytes after validation).
	plain := batchtest.Build(batchtest.Options{}, batchtest.Values(string(make([]byte, 1000))))
	if r := produceRaw(t, cl, "zseg", 0, plain); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("uncompressed batch that fits in a segment as zstd: %+v", r)
	}
	for _, topic := range []string{"small", "seg"} {
		ok := batchtest.Build(batchtest.Options{Codec: batch.Gzip}, batchtest.Values("ok"))
		if r := produceRaw(t, cl, topic, 0, ok); r.ErrorCode != 0 || r.BaseOffset != 0 {
			t.Fatalf("%s after the refused batch: %+v", topic, r)
		}
	}
}
