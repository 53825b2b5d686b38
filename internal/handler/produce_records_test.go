package handler_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
)

// keyedRecords returns n records, keyless at the indexes in keyless.
func keyedRecords(n int, keyless []int32) []batchtest.Record {
	rs := make([]batchtest.Record, n)
	for i := range rs {
		rs[i] = batchtest.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))}
		if slices.Contains(keyless, int32(i)) {
			rs[i].Key = nil
		}
	}
	return rs
}

// storedRecords counts the records stored in topic/0.
func storedRecords(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	var n int64
	for _, b := range fetchBatches(t, cl, topic) {
		h, _ := batch.ParseHeader(b)
		n += int64(h.NumRecords)
	}
	return n
}

// TestProduceRecordErrors: a batch of 100 records with 10 keyless ones to
// a compacted topic fails whole; a franz-go producer gets INVALID_RECORD
// for all 100, and the raw response names exactly the 10 keyless records
// in RecordErrors (KIP-467) with Kafka's messages, in place and when the
// topic's compression.type rebuilds the batch.
func TestProduceRecordErrors(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client(kgo.ProducerLinger(200 * time.Millisecond))
	compact := map[string]*string{"cleanup.policy": strp("compact")}
	createTopic(t, cl, "cmp", 1, compact)
	createTopic(t, cl, "cmpz", 1, map[string]*string{"cleanup.policy": strp("compact"), "compression.type": strp("zstd")})
	keyless := []int32{3, 9, 10, 27, 40, 41, 42, 63, 88, 99}

	// franz-go: every record of the batch fails with INVALID_RECORD.
	var rs []*kgo.Record
	for _, r := range keyedRecords(100, keyless) {
		rs = append(rs, &kgo.Record{Topic: "cmp", Key: r.Key, Value: r.Value})
	}
	results := cl.ProduceSync(ctx(t), rs...)
	if len(results) != 100 {
		t.Fatalf("%d results", len(results))
	}
	for i, res := range results {
		if !errors.Is(res.Err, kerr.InvalidRecord) {
			t.Fatalf("record %d: %v, want INVALID_RECORD", i, res.Err)
		}
	}
	if got := storedRecords(t, cl, "cmp"); got != 0 {
		t.Fatalf("%d records stored after the refused batch", got)
	}

	for _, tc := range []struct {
		topic string
		codec batch.Codec
	}{{"cmp", batch.None}, {"cmp", batch.Gzip}, {"cmpz", batch.Snappy}} {
		r := produceRaw(t, cl, tc.topic, 0, batchtest.Build(batchtest.Options{Codec: tc.codec}, keyedRecords(100, keyless)))
		if r.ErrorCode != kerr.InvalidRecord.Code {
			t.Fatalf("%s codec %v: %v, want INVALID_RECORD", tc.topic, tc.codec, kerr.ErrorForCode(r.ErrorCode))
		}
		var got []int32
		for _, e := range r.ErrorRecords {
			got = append(got, e.RelativeOffset)
			want := "Compacted topic cannot accept message without key in topic partition " + tc.topic + "-0"
			if e.ErrorMessage == nil || *e.ErrorMessage != want {
				t.Fatalf("record %d: message %v, want %q", e.RelativeOffset, e.ErrorMessage, want)
			}
		}
		if !slices.Equal(got, keyless) {
			t.Fatalf("%s codec %v: RecordErrors %v, want %v", tc.topic, tc.codec, got, keyless)
		}
		wantMsg := "One or more records have been rejected due to 10 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=3, message='Compacted topic cannot accept message without key in topic partition " + tc.topic + "-0'), RecordError(batchIndex=9"
		if r.ErrorMessage == nil || !strings.HasPrefix(*r.ErrorMessage, wantMsg) {
			t.Fatalf("ErrorMessage %v, want it to start %q", r.ErrorMessage, wantMsg)
		}
		if got := storedRecords(t, cl, tc.topic); got != 0 {
			t.Fatalf("%s: %d records stored after the refused batch", tc.topic, got)
		}
	}
	// A batch with every key is appended.
	if r := produceRaw(t, cl, "cmpz", 0, batchtest.Build(batchtest.Options{Codec: batch.Gzip}, keyedRecords(5, nil))); r.ErrorCode != 0 || len(r.ErrorRecords) != 0 {
		t.Fatalf("keyed batch: %+v", r)
	}
}

// TestProduceRecordTimestampErrors: records out of the topic's timestamp
// bounds are named in RecordErrors with INVALID_TIMESTAMP; on a compacted
// topic a keyless record is reported for its key first, and the partition
// says INVALID_TIMESTAMP when any timestamp failed; a producer-set
// LogAppendTime bit fails every record.
func TestProduceRecordTimestampErrors(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	hour := "3600000"
	createTopic(t, cl, "ts", 1, map[string]*string{"message.timestamp.before.max.ms": &hour})
	createTopic(t, cl, "tsc", 1, map[string]*string{"message.timestamp.before.max.ms": &hour, "cleanup.policy": strp("compact")})
	createTopic(t, cl, "lat", 1, map[string]*string{"message.timestamp.type": strp("LogAppendTime")})

	now := time.Now().UnixMilli()
	recs := keyedRecords(6, nil)
	for _, i := range []int{2, 5} {
		recs[i].TimestampDelta = y2001 - now
	}
	r := produceRaw(t, cl, "ts", 0, batchtest.Build(batchtest.Options{BaseTimestamp: now}, recs))
	if r.ErrorCode != kerr.InvalidTimestamp.Code || len(r.ErrorRecords) != 2 || r.ErrorRecords[0].RelativeOffset != 2 || r.ErrorRecords[1].RelativeOffset != 5 {
		t.Fatalf("old records: %+v, want INVALID_TIMESTAMP for records 2 and 5", r)
	}
	if m := *r.ErrorRecords[0].ErrorMessage; !strings.HasPrefix(m, fmt.Sprintf("Timestamp %d of message with offset 2 is out of range. The timestamp should be within [", y2001)) {
		t.Fatalf("record message %q", m)
	}
	if r.ErrorMessage == nil || *r.ErrorMessage != "One or more records have been rejected due to invalid timestamp" {
		t.Fatalf("ErrorMessage %v", r.ErrorMessage)
	}

	// Record 0 keyless, 1 keyless and old, 2 old: keys are checked first.
	recs = keyedRecords(4, []int32{0, 1})
	recs[1].TimestampDelta = y2001 - now
	recs[2].TimestampDelta = y2001 - now
	r = produceRaw(t, cl, "tsc", 0, batchtest.Build(batchtest.Options{BaseTimestamp: now}, recs))
	if r.ErrorCode != kerr.InvalidTimestamp.Code || len(r.ErrorRecords) != 3 {
		t.Fatalf("compacted with old records: %+v", r)
	}
	for i, want := range []string{"Compacted topic", "Compacted topic", "Timestamp "} {
		if e := r.ErrorRecords[i]; e.RelativeOffset != int32(i) || !strings.HasPrefix(*e.ErrorMessage, want) {
			t.Fatalf("record error %d: %d %q, want index %d %q...", i, e.RelativeOffset, *e.ErrorMessage, i, want)
		}
	}

	// The LogAppendTime bit, set by the producer, fails every record.
	own := batchtest.Build(batchtest.Options{}, keyedRecords(3, nil))
	if _, err := batch.SetMaxTimestamp(own, true, now); err != nil {
		t.Fatal(err)
	}
	r = produceRaw(t, cl, "lat", 0, own)
	if r.ErrorCode != kerr.InvalidTimestamp.Code || len(r.ErrorRecords) != 3 || !strings.Contains(*r.ErrorRecords[2].ErrorMessage, "Producer should not set timestamp type to LogAppendTime") {
		t.Fatalf("producer-set LogAppendTime: %+v", r)
	}
	for _, topic := range []string{"ts", "tsc", "lat"} {
		if got := storedRecords(t, cl, topic); got != 0 {
			t.Fatalf("%s: %d records stored", topic, got)
		}
	}
}

// TestProduceErrorLogStartOffset: a partition refused once its leader is
// found reports its log start offset, as Kafka's appendToLocalLog does,
// except for the errors Kafka answers with -1 (here CORRUPT_MESSAGE);
// an unknown partition has -1.
func TestProduceErrorLogStartOffset(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	createTopic(t, cl, "lso", 1, map[string]*string{"cleanup.policy": strp("compact,delete")})
	if r := produceRaw(t, cl, "lso", 0, batchtest.Build(batchtest.Options{}, keyedRecords(10, nil))); r.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	adm := kadm.NewClient(cl)
	dr, err := adm.DeleteRecords(ctx(t), kadm.Offsets{"lso": {0: {Topic: "lso", Partition: 0, At: 4}}})
	if err != nil || dr.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, dr.Error())
	}
	r := produceRaw(t, cl, "lso", 0, batchtest.Build(batchtest.Options{}, keyedRecords(3, []int32{1})))
	if r.ErrorCode != kerr.InvalidRecord.Code || r.LogStartOffset != 4 || r.BaseOffset != -1 {
		t.Fatalf("keyless: %v, LogStartOffset %d, BaseOffset %d; want INVALID_RECORD, 4, -1", kerr.ErrorForCode(r.ErrorCode), r.LogStartOffset, r.BaseOffset)
	}
	corrupt := batchtest.Build(batchtest.Options{}, keyedRecords(3, nil))
	corrupt[len(corrupt)-1] ^= 0xff
	if r := produceRaw(t, cl, "lso", 0, corrupt); r.ErrorCode != kerr.CorruptMessage.Code || r.LogStartOffset != -1 {
		t.Fatalf("corrupt: %v, LogStartOffset %d; want CORRUPT_MESSAGE, -1", kerr.ErrorForCode(r.ErrorCode), r.LogStartOffset)
	}
	if r := produceRaw(t, cl, "lso", 0, batchtest.Build(batchtest.Options{}, keyedRecords(1, nil))); r.ErrorCode != 0 || r.LogStartOffset != 4 {
		t.Fatalf("good batch: %v, LogStartOffset %d", kerr.ErrorForCode(r.ErrorCode), r.LogStartOffset)
	}
}
