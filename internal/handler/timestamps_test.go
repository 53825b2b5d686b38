package handler_test

import (
	"bytes"
	"math"
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

// y2001 is 2001-01-01T00:00:00Z in ms: far older than any bound tested.
const y2001 = int64(978307200000)

// fetchBatches returns the stored batches of topic/0 from offset 0.
func fetchBatches(t *testing.T, cl *kgo.Client, topic string) [][]byte {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxBytes = 10 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = topicID(t, cl, topic) // kgo sends Fetch v16: by id (KIP-516)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.FetchOffset = 0
	rp.PartitionMaxBytes = 10 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.FetchResponse](t, cl, req)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch %s: %v", topic, kerr.ErrorForCode(p.ErrorCode))
	}
	var out [][]byte
	for rest := p.RecordBatches; len(rest) > 0; {
		_, b, r, err := batch.Next(rest)
		if err != nil {
			t.Fatalf("fetched bytes of %s: %v", topic, err)
		}
		out = append(out, b)
		rest = r
	}
	return out
}

// window reports whether ts lies within a generous minute around [lo, hi]
// (the broker's clock read between two of ours; the slack only absorbs a
// clock step, it says nothing about speed).
func window(ts, lo, hi int64) bool { return ts >= lo-60_000 && ts <= hi+60_000 }

func TestLogAppendTimeStampsBatch(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	createTopic(t, cl, "lat", 1, map[string]*string{"message.timestamp.type": strp("LogAppendTime")})
	createTopic(t, cl, "ct", 1, nil)

	for _, codec := range []batch.Codec{batch.None, batch.Zstd} {
		recs := batchtest.Values("a", "b", "c")
		recs[2].TimestampDelta = 42
		mk := func() []byte {
			return batchtest.Build(batchtest.Options{Codec: codec, BaseTimestamp: y2001}, recs)
		}
		lo := time.Now().UnixMilli()
		r := produceRaw(t, cl, "lat", 0, mk())
		hi := time.Now().UnixMilli()
		if r.ErrorCode != 0 {
			t.Fatalf("%v: produce to LogAppendTime topic: %v", codec, kerr.ErrorForCode(r.ErrorCode))
		}
		if !window(r.LogAppendTime, lo, hi) {
			t.Fatalf("%v: response LogAppendTime %d, want the broker's time (about %d..%d)", codec, r.LogAppendTime, lo, hi)
		}
		if c := produceRaw(t, cl, "ct", 0, mk()); c.ErrorCode != 0 || c.LogAppendTime != -1 {
			t.Fatalf("%v: CreateTime topic: %+v, want LogAppendTime -1", codec, c)
		}
	}

	for i, b := range fetchBatches(t, cl, "lat") {
		h, err := batch.Validate(b)
		if err != nil {
			t.Fatalf("stored batch %d does not validate (CRC?): %v", i, err)
		}
		if !h.LogAppendTime() || h.MaxTimestamp < y2001+1e9 {
			t.Fatalf("stored batch %d: LogAppendTime %v, max timestamp %d", i, h.LogAppendTime(), h.MaxTimestamp)
		}
		if h.BaseTimestamp != y2001 {
			t.Fatalf("base timestamp rewritten: %d", h.BaseTimestamp)
		}
		var deltas []int64
		batch.Records(b, func(r batch.Record) bool { deltas = append(deltas, r.TimestampDelta); return true })
		if len(deltas) != 3 || deltas[2] != 42 {
			t.Fatalf("record timestamp deltas changed: %v", deltas)
		}
	}
	// The stamp equals what the response said, and consumers see it.
	got := consume(t, n, "lat", 6)
	for _, r := range got {
		if r.Attrs.TimestampType() != 1 || r.Timestamp.Year() < 2020 {
			t.Fatalf("consumed %q@%d: type %d time %v", r.Value, r.Offset, r.Attrs.TimestampType(), r.Timestamp)
		}
	}
	stored := fetchBatches(t, cl, "lat")
	h0, _ := batch.ParseHeader(stored[0])
	if got[0].Timestamp.UnixMilli() != h0.MaxTimestamp {
		t.Fatalf("consumer time %d, stored max timestamp %d", got[0].Timestamp.UnixMilli(), h0.MaxTimestamp)
	}

	// CreateTime: stored as produced (past the base offset and epoch).
	want := batchtest.Build(batchtest.Options{BaseTimestamp: y2001}, batchtest.Values("x"))
	if r := produceRaw(t, cl, "ct", 0, append([]byte(nil), want...)); r.ErrorCode != 0 || r.LogAppendTime != -1 {
		t.Fatalf("%+v", r)
	}
	ct := fetchBatches(t, cl, "ct")
	last := ct[len(ct)-1]
	if !bytes.Equal(last[16:], want[16:]) {
		t.Fatal("CreateTime batch not stored byte for byte")
	}
	for _, r := range consume(t, n, "ct", 3) {
		if r.Timestamp.UnixMilli() < y2001 || r.Timestamp.Year() != 2001 || r.Attrs.TimestampType() != 0 {
			t.Fatalf("CreateTime record %d: %v type %d", r.Offset, r.Timestamp, r.Attrs.TimestampType())
		}
	}
}

func TestLogAppendTimeResponseRules(t *testing.T) {
	// The broker default applies to topics that do not set it.
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, "", map[string]string{"log.message.timestamp.type": "LogAppendTime"}, clk)
	cl := n.client()
	createTopic(t, cl, "dflt", 1, map[string]*string{"message.timestamp.before.max.ms": strp("3600000")})

	// Bounds are for CreateTime only: a 2001 record is fine here.
	b := func(seq int32, vals ...string) []byte {
		return batchtest.Build(batchtest.Options{BaseTimestamp: y2001, Idempotent: true, ProducerID: 77, BaseSequence: seq}, batchtest.Values(vals...))
	}
	first := produceRaw(t, cl, "dflt", 0, b(0, "a", "b"))
	if first.ErrorCode != 0 || first.BaseOffset != 0 || first.LogAppendTime != clk.Now().UnixMilli() {
		t.Fatalf("first: %+v", first)
	}
	if r := produceRaw(t, cl, "dflt", 0, b(2, "c")); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("second: %+v", r)
	}
	// A retry of the first batch, at a later millisecond, answers the
	// original offsets and the original batch's time.
	clk.Advance(5 * time.Millisecond)
	dup := produceRaw(t, cl, "dflt", 0, b(0, "a", "b"))
	if dup.ErrorCode != 0 || dup.BaseOffset != 0 || dup.LogAppendTime != first.LogAppendTime {
		t.Fatalf("duplicate: %+v, want offset 0 and LogAppendTime %d", dup, first.LogAppendTime)
	}
	if got := fetchBatches(t, cl, "dflt"); len(got) != 2 {
		t.Fatalf("%d batches stored, want 2", len(got))
	} else if h, _ := batch.ParseHeader(got[0]); h.MaxTimestamp != first.LogAppendTime {
		t.Fatalf("stored time %d, response said %d", h.MaxTimestamp, first.LogAppendTime)
	}

	// A producer may not set the LogAppendTime bit itself.
	own := batchtest.Build(batchtest.Options{}, batchtest.Values("mine"))
	if _, err := batch.SetMaxTimestamp(own, true, 1234); err != nil {
		t.Fatal(err)
	}
	if r := produceRaw(t, cl, "dflt", 0, own); r.ErrorCode != kerr.InvalidTimestamp.Code || r.LogAppendTime != -1 {
		t.Fatalf("producer-set LogAppendTime: %+v", r)
	}
}

func TestTimestampBounds(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	now := time.Now().UnixMilli()
	hour := int64(3_600_000)
	topics := map[string]map[string]*string{
		"default":  nil,
		"before1h": {"message.timestamp.before.max.ms": strp("3600000")},
		"afterMax": {"message.timestamp.after.max.ms": strp(strconv.FormatInt(math.MaxInt64, 10))},
		"diff1m":   {"message.timestamp.difference.max.ms": strp("60000")},
		"diffAndBefore": {
			"message.timestamp.difference.max.ms": strp("60000"),
			"message.timestamp.before.max.ms":     strp(strconv.FormatInt(100*hour, 10)),
		},
	}
	for name, cfg := range topics {
		createTopic(t, cl, name, 1, cfg)
	}
	cases := []struct {
		topic string
		ts    []int64 // record timestamps (one batch)
		ok    bool
	}{
		{"default", []int64{y2001}, true},             // before: Long.MAX_VALUE
		{"default", []int64{now + 2*hour}, false},     // after: one hour (Kafka 4.0)
		{"default", []int64{now + 10*60_000}, true},   // within the hour
		{"before1h", []int64{y2001}, false},           // too old
		{"before1h", []int64{now, y2001, now}, false}, // one old record fails the batch
		{"before1h", []int64{now - 10*60_000}, true},
		{"afterMax", []int64{now + 1000*hour}, true},
		{"diff1m", []int64{now - hour}, false},
		{"diff1m", []int64{now + hour}, false},
		{"diff1m", []int64{now}, true},
		{"diffAndBefore", []int64{now - 50*hour}, true}, // before set: difference not used for it
		{"diffAndBefore", []int64{now + 10*60_000}, false},
	}
	appended := map[string]int64{}
	for i, tc := range cases {
		var recs []batchtest.Record
		for _, ts := range tc.ts {
			recs = append(recs, batchtest.Record{Value: []byte("v"), TimestampDelta: ts - tc.ts[0]})
		}
		r := produceRaw(t, cl, tc.topic, 0, batchtest.Build(batchtest.Options{BaseTimestamp: tc.ts[0]}, recs))
		switch {
		case tc.ok && (r.ErrorCode != 0 || r.BaseOffset != appended[tc.topic]):
			t.Errorf("case %d (%s %v): %v at %d, want success at %d", i, tc.topic, tc.ts, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, appended[tc.topic])
		case !tc.ok && r.ErrorCode != kerr.InvalidTimestamp.Code:
			t.Errorf("case %d (%s %v): %v, want INVALID_TIMESTAMP", i, tc.topic, tc.ts, kerr.ErrorForCode(r.ErrorCode))
		}
		if r.ErrorCode == 0 {
			appended[tc.topic] += int64(len(tc.ts))
		}
	}
	// Nothing of the refused batches was stored.
	for name := range topics {
		var stored int64
		for _, b := range fetchBatches(t, cl, name) {
			h, _ := batch.ParseHeader(b)
			stored += int64(h.NumRecords)
		}
		if stored != appended[name] {
			t.Errorf("%s: %d records stored, want %d", name, stored, appended[name])
		}
	}
}

func TestCreateTimeMaxTimestampCorrected(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	createTopic(t, cl, "fix", 1, nil)
	recs := batchtest.Values("a", "b")
	recs[1].TimestampDelta = 500
	b := batchtest.Build(batchtest.Options{BaseTimestamp: y2001}, recs)
	// A producer that wrote the wrong max timestamp (base, not the max).
	if _, err := batch.SetMaxTimestamp(b, false, y2001); err != nil {
		t.Fatal(err)
	}
	if r := produceRaw(t, cl, "fix", 0, b); r.ErrorCode != 0 || r.LogAppendTime != -1 {
		t.Fatalf("%+v", r)
	}
	stored := fetchBatches(t, cl, "fix")[0]
	h, err := batch.Validate(stored)
	if err != nil || h.MaxTimestamp != y2001+500 || h.LogAppendTime() {
		t.Fatalf("stored header %+v (%v), want CreateTime max timestamp %d", h, err, y2001+500)
	}
}

func TestDescribeTimestampConfigs(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	createTopic(t, cl, "desc", 1, nil)
	rc, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx(t), "desc")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"message.timestamp.type":              "CreateTime",
		"message.timestamp.before.max.ms":     "9223372036854775807",
		"message.timestamp.after.max.ms":      "3600000",
		"message.timestamp.difference.max.ms": "9223372036854775807",
	}
	for _, c := range rc[0].Configs {
		if w, ok := want[c.Key]; ok {
			if c.MaybeValue() != w || c.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("%s = %q (source %v), want default %q", c.Key, c.MaybeValue(), c.Source, w)
			}
			delete(want, c.Key)
		}
	}
	if len(want) != 0 {
		t.Fatalf("not described: %v", want)
	}
}
