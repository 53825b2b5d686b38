package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// CheckDynamicBrokerConfigs answers as Kafka's DynamicBrokerConfig and
// ConfigAdminManager do: read-only keys and bad values INVALID_REQUEST
// with Kafka's messages, per-broker keys refused at the cluster level;
// sluice also refuses unknown names and what it reads at start only.
func TestCheckDynamicBrokerConfigs(t *testing.T) {
	cases := []struct {
		set       map[string]string
		perBroker bool
		code      *kerr.Error
		msg       string
	}{
		{map[string]string{"log.retention.ms": "1000", "message.max.bytes": "2000", "log.cleaner.threads": "2"}, false, nil, ""},
		{map[string]string{"leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "1000"}, true, nil, ""},
		{map[string]string{"background.threads": "9", "log.cleanup.policy": "delete,compact"}, false, nil, ""},
		{map[string]string{"sasl.kerberos.min.time.before.relogin": "58000"}, true, nil, ""},
		{map[string]string{"sasl.kerberos.min.time.before.relogin": "58000"}, false, kerr.InvalidRequest,
			"Cannot update these configs at default cluster level, broker id must be specified: Set(sasl.kerberos.min.time.before.relogin)"},
		{map[string]string{"broker.id": "3", "log.dirs": "/x"}, true, kerr.InvalidRequest, "Cannot update these configs dynamically: Set(broker.id, log.dirs)"},
		{map[string]string{"log.retention.hours": "3"}, false, kerr.InvalidRequest, "Cannot update these configs dynamically: Set(log.retention.hours)"},
		{map[string]string{"ssl.keystore.location": "/k.pem"}, true, kerr.InvalidRequest,
			"These security configs can be dynamically updated only per-listener using the listener prefix: Set(ssl.keystore.location)"},
		{map[string]string{"listeners": "PLAINTEXT://:9092"}, true, kerr.InvalidRequest, "sluice reads them at start only"},
		{map[string]string{"producer.id.expiration.ms": "1000"}, false, kerr.InvalidRequest, "sluice reads them at start only"},
		{map[string]string{"listener.name.plaintext.ssl.client.auth": "required"}, true, kerr.InvalidRequest, "sluice reads them at start only"},
		{map[string]string{"no.such.setting": "1"}, false, kerr.InvalidConfig, "Unknown broker configs: Set(no.such.setting)"},
		{map[string]string{"log.retention.ms": "soon"}, false, kerr.InvalidRequest, `invalid value "soon" for log.retention.ms: expected a long`},
		{map[string]string{"log.cleaner.threads": "0"}, false, kerr.InvalidRequest, "log.cleaner.threads"},
	}
	for _, c := range cases {
		err := CheckDynamicBrokerConfigs(c.set, c.perBroker)
		if c.code == nil {
			if err != nil {
				t.Errorf("%v: %v", c.set, err)
			}
			continue
		}
		if !errors.Is(err, c.code) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v (per-broker %v): %v, want %v containing %q", c.set, c.perBroker, err, c.code, c.msg)
		}
	}
}

// A broker's dynamic value wins over the cluster default, which wins
// over server.properties (hours synonyms included), which wins over
// Kafka's default; each with its source.
func TestDynamicPrecedence(t *testing.T) {
	b := Defaults()
	b.Props["log.retention.hours"] = "2"
	check := func(name, want string, wantSrc Source) {
		t.Helper()
		v, src, _ := b.Lookup(name)
		if v != want || src != wantSrc {
			t.Errorf("%s = %s (source %d), want %s (%d)", name, v, src, want, wantSrc)
		}
	}
	check("log.retention.ms", "7200000", SourceStaticBroker)
	check("log.segment.bytes", "1073741824", SourceDefault)
	if !b.SetDynamic(map[string]string{"log.retention.ms": "1000", "log.segment.bytes": "2048", "listeners": "X://:1"},
		map[string]string{"log.segment.bytes": "4096"}) {
		t.Fatal("SetDynamic reported no change")
	}
	check("log.retention.ms", "1000", SourceDynamicDefault)
	check("log.segment.bytes", "4096", SourceDynamicBroker)
	if v, _, _ := b.Lookup("listeners"); strings.Contains(v, "X://") {
		t.Errorf("a refused key in the stored configs was applied: %s", v)
	}
	tc := TopicConfig{Set: map[string]string{"retention.ms": "5"}, Broker: b}
	if v, src := tc.Get("segment.bytes"); v != "4096" || src != SourceDynamicBroker {
		t.Errorf("topic segment.bytes %s %d", v, src)
	}
	if v, src := tc.Get("retention.ms"); v != "5" || src != SourceTopic {
		t.Errorf("topic retention.ms %s %d", v, src)
	}
	if b.SetDynamic(map[string]string{"log.retention.ms": "1000", "log.segment.bytes": "2048"}, map[string]string{"log.segment.bytes": "4096"}) {
		t.Error("the same configs reported as a change")
	}
	b.SetDynamic(nil, nil)
	check("log.retention.ms", "7200000", SourceStaticBroker)
}

// Group configs are checked as Kafka's GroupConfig.validate does, against
// the broker's bounds.
func TestCheckGroupConfigs(t *testing.T) {
	b := Defaults()
	for _, c := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"consumer.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest"}, ""},
		{map[string]string{"consumer.session.timeout.ms": "40000"}, "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"},
		{map[string]string{"consumer.session.timeout.ms": "70000"}, "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"},
		{map[string]string{"consumer.heartbeat.interval.ms": "abc"}, "expected an int"},
		{map[string]string{"share.auto.offset.reset": "middle"}, "expected earliest, latest or by_duration"},
		{map[string]string{"bogus": "1"}, "Unknown group config name: bogus"},
	} {
		err := CheckGroupConfigs(c.set, b)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.set, err)
			}
			continue
		}
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want INVALID_CONFIG %q", c.set, err, c.want)
		}
	}
	b.Props["group.consumer.max.heartbeat.interval.ms"] = "60000"
	b.Props["group.consumer.max.session.timeout.ms"] = "60000"
	err := CheckGroupConfigs(map[string]string{"consumer.heartbeat.interval.ms": "50000", "consumer.session.timeout.ms": "50000"}, b)
	if err == nil || !strings.Contains(err.Error(), "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms") {
		t.Errorf("session not above heartbeat: %v", err)
	}
}
