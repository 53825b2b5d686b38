package quota

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/metadata"
)

func name(n string) metadata.QuotaName { return metadata.QuotaName{Set: true, Name: n} }

var dflt = metadata.QuotaName{Set: true, Default: true}

// The quota that applies follows KIP-55's order, and its rate is kept per
// the entity that matched: a user quota is shared by the user's clients.
func TestLookupOrder(t *testing.T) {
	im := &metadata.Image{}
	set := func(e metadata.QuotaEntity, v float64) {
		metadata.ApplyQuotas(im, []metadata.QuotaAlteration{{Entity: e, Ops: []metadata.QuotaOp{{Key: metadata.QuotaProducerByteRate, Value: v}}}})
	}
	set(metadata.QuotaEntity{ClientID: dflt}, 8)
	set(metadata.QuotaEntity{ClientID: name("c")}, 7)
	set(metadata.QuotaEntity{User: dflt}, 6)
	set(metadata.QuotaEntity{User: name("alice")}, 3)
	set(metadata.QuotaEntity{User: name("alice"), ClientID: name("c")}, 1)
	m := New(metadata.QuotaProducerByteRate, Config{})
	for _, c := range []struct {
		user, client string
		want         float64
		key          sensorKey
	}{
		{"alice", "c", 1, sensorKey{"alice", "c"}},
		{"alice", "d", 3, sensorKey{user: "alice"}},
		{"bob", "c", 6, sensorKey{user: "bob"}},
	} {
		v, k, ok := m.lookup(im.Quotas, c.user, c.client)
		if !ok || v != c.want || k != c.key {
			t.Errorf("%s/%s: %v %+v %v, want %v %+v", c.user, c.client, v, k, ok, c.want, c.key)
		}
	}
	im2 := &metadata.Image{}
	metadata.ApplyQuotas(im2, []metadata.QuotaAlteration{{Entity: metadata.QuotaEntity{ClientID: dflt},
		Ops: []metadata.QuotaOp{{Key: metadata.QuotaProducerByteRate, Value: 8}}}})
	if v, k, ok := m.lookup(im2.Quotas, "bob", "x"); !ok || v != 8 || k != (sensorKey{clientID: "x"}) {
		t.Errorf("default client id: %v %+v %v", v, k, ok)
	}
	if _, _, ok := m.lookup(nil, "bob", "x"); ok {
		t.Error("a quota without any stored")
	}
}

// Record throttles as Kafka's Rate does: a burst within the padded span
// passes, the excess is returned as (rate-quota)/quota*span, and a client
// that waits its throttle times averages the quota.
func TestRecordThrottle(t *testing.T) {
	im := &metadata.Image{}
	metadata.ApplyQuotas(im, []metadata.QuotaAlteration{{Entity: metadata.QuotaEntity{ClientID: name("c")},
		Ops: []metadata.QuotaOp{{Key: metadata.QuotaProducerByteRate, Value: 1000}}}})
	m := New(metadata.QuotaProducerByteRate, Config{Samples: 11, Window: time.Second})
	t0 := time.Unix(1000, 0)
	// 10 s of padding: 10000 bytes at once are within the quota.
	if d := m.Record(im.Quotas, "u", "c", 10000, t0); d != 0 {
		t.Fatalf("burst within the span throttled %v", d)
	}
	// 11000 more: rate 21000/10 s = 2100/s, throttle 1.1 * 10 s = 11 s.
	if d := m.Record(im.Quotas, "u", "c", 11000, t0); d != 11*time.Second {
		t.Fatalf("throttle %v, want 11s", d)
	}
	if d := m.Record(im.Quotas, "u", "other", 1e9, t0); d != 0 {
		t.Fatalf("a client without a quota throttled %v", d)
	}
	// A client sending 500 bytes and then waiting its throttle time
	// averages the quota (plus the first span's burst, 10000 bytes).
	now, sent := t0.Add(11*time.Second), int64(0)
	start := now
	for now.Sub(start) < 300*time.Second {
		d := m.Record(im.Quotas, "u", "c", 500, now)
		sent += 500
		now = now.Add(max(d, 10*time.Millisecond))
	}
	if r := float64(sent) / now.Sub(start).Seconds(); r < 950 || r > 1060 {
		t.Fatalf("average %.0f B/s, want ~1000", r)
	}
}

// request_percentage (KIP-124) records handling time as percent of one
// thread: 50 ms over a 10 s span is 0.5 %; the throttle is at most one
// window (ClientRequestQuotaManager); MaxInWindow is the quota times
// quota.window.num - 1 windows.
func TestRequestPercentage(t *testing.T) {
	im := &metadata.Image{}
	metadata.ApplyQuotas(im, []metadata.QuotaAlteration{{Entity: metadata.QuotaEntity{ClientID: name("c")},
		Ops: []metadata.QuotaOp{{Key: metadata.QuotaRequestPercentage, Value: 1}, {Key: metadata.QuotaConsumerByteRate, Value: 1000}}}})
	if p := Percent(50 * time.Millisecond); p != 5 {
		t.Fatalf("Percent(50ms) = %v, want 5 (percent-seconds)", p)
	}
	m := New(metadata.QuotaRequestPercentage, Config{Samples: 11, Window: time.Second})
	t0 := time.Unix(1000, 0)
	// 1 % over a 10 s span: 100 ms of handling pass.
	if d := m.RecordValue(im.Quotas, "u", "c", Percent(100*time.Millisecond), t0); d != 0 {
		t.Fatalf("100 ms within 1%% of 10 s throttled %v", d)
	}
	// 50 ms more: rate 1.5 %, throttle 0.5 * 10 s = 5 s, bounded to 1 s.
	if d := m.RecordValue(im.Quotas, "u", "c", Percent(50*time.Millisecond), t0); d != time.Second {
		t.Fatalf("throttle %v, want one window (1s)", d)
	}
	if d := m.RecordValue(im.Quotas, "u", "free", Percent(time.Hour), t0); d != 0 {
		t.Fatalf("a client without a quota throttled %v", d)
	}
	f := New(metadata.QuotaConsumerByteRate, Config{Samples: 11, Window: time.Second})
	if v, ok := f.MaxInWindow(im.Quotas, "u", "c"); !ok || v != 10000 {
		t.Fatalf("MaxInWindow = %v %v, want 10000", v, ok)
	}
	if _, ok := f.MaxInWindow(im.Quotas, "u", "free"); ok {
		t.Fatal("MaxInWindow without a quota")
	}
}
