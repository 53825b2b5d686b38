package compat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzTimestampTypes produces records dated 2001 with franz-go to a
// LogAppendTime topic, a CreateTime topic and a CreateTime topic with
// message.timestamp.before.max.ms=1h, over TCP to a real sluice process,
// and reads them back with franz-go.
func TestFranzTimestampTypes(t *testing.T) {
	p := startBroker(t)
	y2001 := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	hour := "3600000"
	lat, ct, bounded := uniqueTopic(t)+"-lat", uniqueTopic(t)+"-ct", uniqueTopic(t)+"-bounded"
	typ := "LogAppendTime"
	createTopicWithConfigs(t, p.Addr(), lat, map[string]*string{"message.timestamp.type": &typ})
	createTopicWithConfigs(t, p.Addr(), ct, nil)
	createTopicWithConfigs(t, p.Addr(), bounded, map[string]*string{"message.timestamp.before.max.ms": &hour})

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const n = 5
	for _, topic := range []string{lat, ct} {
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte{byte('a' + i)}, Timestamp: y2001.Add(time.Duration(i) * time.Second)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}

	// The bounded topic refuses a record from 2001 and stores nothing.
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: bounded, Value: []byte("old"), Timestamp: y2001}).FirstErr()
	if !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("record dated 2001 to a topic with before.max.ms=1h: %v, want INVALID_TIMESTAMP", err)
	}
	if r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: bounded, Value: []byte("now")}).First(); err != nil || r.Offset != 0 {
		t.Fatalf("current record to the bounded topic: %v, %v (want offset 0)", r, err)
	}

	lo := time.Now().Add(-10 * time.Minute) // generous: not a speed test
	for _, r := range consumeRecords(t, p.Addr(), lat, n) {
		if r.Attrs.TimestampType() != 1 {
			t.Fatalf("LogAppendTime topic: record %d timestamp type %d, want 1", r.Offset, r.Attrs.TimestampType())
		}
		if r.Timestamp.Before(lo) || r.Timestamp.After(time.Now().Add(10*time.Minute)) {
			t.Fatalf("LogAppendTime topic: record %d timestamp %v, want about now", r.Offset, r.Timestamp)
		}
	}
	for _, r := range consumeRecords(t, p.Addr(), ct, n) {
		want := y2001.Add(time.Duration(r.Offset) * time.Second)
		if r.Attrs.TimestampType() != 0 || !r.Timestamp.Equal(want) {
			t.Fatalf("CreateTime topic: record %d timestamp %v type %d, want %v type 0", r.Offset, r.Timestamp.UTC(), r.Attrs.TimestampType(), want)
		}
	}
	if got := endOffsets(t, p.Addr(), bounded)[0]; got != 1 {
		t.Fatalf("bounded topic end offset %d, want 1 (the refused record not stored)", got)
	}
}

func createTopicWithConfigs(t *testing.T, addr, topic string, configs map[string]*string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
}

// consumeRecords reads want records of topic from the start with franz-go.
func consumeRecords(t *testing.T, addr, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: consumed %d of %d: %v", topic, len(out), want, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}
