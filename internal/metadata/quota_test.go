package metadata

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/vfs"
)

func qname(n string) QuotaName { return QuotaName{Set: true, Name: n} }

var qdefault = QuotaName{Set: true, Default: true}

// Alterations are checked as Kafka's ClientQuotaControlManager does, kept
// in the image file across a reopen, and removing an entity's last key
// drops it.
func TestLocalClientQuotas(t *testing.T) {
	dir := t.TempDir()
	open := func() *Local {
		l, err := OpenLocal(vfs.Default, dir, &config.Broker{}, Broker{ID: 1, Host: "localhost", Port: 9092}, "")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	alice := QuotaEntity{User: qname("alice")}
	both := QuotaEntity{User: qname("alice"), ClientID: qdefault}
	entries := []QuotaAlteration{
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1024}, {Key: QuotaRequestPercentage, Value: 12.5}}},
		{Entity: both, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: 2048}}},
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1.5}}},                      // not a Long
		{Entity: alice, Ops: []QuotaOp{{Key: "SCRAM-SHA-256", Value: 1}}},                              // not a quota key
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: 0}}},                        // not positive
		{Entity: QuotaEntity{User: qname("")}, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: 1}}}, // empty user
		{Entity: QuotaEntity{}, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: 1}}},                // empty entity
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: 1}, {Key: QuotaConsumerByteRate, Remove: true}}},
	}
	errs, err := l.AlterClientQuotas(context.Background(), entries)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if want := i >= 2; (e != nil) != want || (want && !errors.Is(e, kerr.InvalidRequest)) {
			t.Errorf("entry %d: %v", i, e)
		}
	}
	l.Close()
	l = open()
	defer l.Close()
	if v, ok := l.Image().QuotaOf(alice, QuotaRequestPercentage); !ok || v != 12.5 {
		t.Fatalf("after reopen: %v %v (%+v)", v, ok, l.Image().Quotas)
	}
	if _, err := l.AlterClientQuotas(context.Background(), []QuotaAlteration{{Entity: both, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	if len(l.Image().Quotas) != 1 || l.Image().Quotas[0].Entity != alice {
		t.Fatalf("after removing the last key: %+v", l.Image().Quotas)
	}
}

// DescribeQuotas matches as ClientQuotasImage.describe: exact names,
// defaults, specified names, strict filters, and its errors.
func TestDescribeQuotas(t *testing.T) {
	im := &Image{}
	set := func(e QuotaEntity) {
		ApplyQuotas(im, []QuotaAlteration{{Entity: e, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1}}}})
	}
	set(QuotaEntity{User: qname("alice")})
	set(QuotaEntity{User: qname("alice"), ClientID: qname("c1")})
	set(QuotaEntity{User: qdefault})
	set(QuotaEntity{ClientID: qname("c1")})
	set(QuotaEntity{ClientID: qdefault})
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		comps  []QuotaComponent
		strict bool
		want   int
	}{
		{nil, false, 5},
		{nil, true, 0},
		{[]QuotaComponent{{Type: "user", Match: s("alice")}}, false, 2},
		{[]QuotaComponent{{Type: "user", Match: s("alice")}}, true, 1},
		{[]QuotaComponent{{Type: "user", MatchType: 1}}, false, 1},
		{[]QuotaComponent{{Type: "user", MatchType: 2}}, false, 2},
		{[]QuotaComponent{{Type: "client-id", MatchType: 2}}, true, 1},
		{[]QuotaComponent{{Type: "client-id", MatchType: 0}}, false, 1}, // null EXACT: the default
		{[]QuotaComponent{{Type: "ip", MatchType: 2}}, false, 0},
	} {
		got, err := DescribeQuotas(im, c.comps, c.strict)
		if err != nil || len(got) != c.want {
			t.Errorf("%+v strict=%v: %d entities %v, want %d", c.comps, c.strict, len(got), err, c.want)
		}
	}
	for _, c := range []struct {
		comps []QuotaComponent
		err   error
	}{
		{[]QuotaComponent{{Type: "user", MatchType: 2}, {Type: "user", MatchType: 1}}, kerr.InvalidRequest},
		{[]QuotaComponent{{Type: "user", MatchType: 1, Match: s("x")}}, kerr.InvalidRequest},
		{[]QuotaComponent{{Type: "user", MatchType: 3}}, kerr.InvalidRequest},
		{[]QuotaComponent{{Type: "ip", MatchType: 2}, {Type: "user", MatchType: 2}}, kerr.InvalidRequest},
		{[]QuotaComponent{{Type: ""}}, kerr.InvalidRequest},
		{[]QuotaComponent{{Type: "group"}}, kerr.UnsupportedVersion},
	} {
		if _, err := DescribeQuotas(im, c.comps, false); !errors.Is(err, c.err) {
			t.Errorf("%+v: %v, want %v", c.comps, err, c.err)
		}
	}
}
