package config

import (
	"testing"
	"time"
)

func TestParseShareAutoOffsetReset(t *testing.T) {
	for _, c := range []struct {
		in   string
		kind string
		d    time.Duration
	}{
		{"earliest", "earliest", 0},
		{"LATEST", "latest", 0},
		{"by_duration:PT1H", "by_duration", time.Hour},
		{"by_duration:P1DT2H3M4.5S", "by_duration", 26*time.Hour + 3*time.Minute + 4500*time.Millisecond},
		{"by_duration:pt0s", "by_duration", 0},
		{"by_duration:P2D", "by_duration", 48 * time.Hour},
	} {
		got, err := ParseShareAutoOffsetReset(c.in)
		if err != nil || got.Kind != c.kind || got.Duration != c.d {
			t.Errorf("%q: %+v, %v", c.in, got, err)
		}
	}
	for _, bad := range []string{"", "middle", "by_duration:", "by_duration:P", "by_duration:PT", "by_duration:-PT1H", "by_duration:PT-1H", "by_duration:1H", "by_duration:P99999999999999D"} {
		if _, err := ParseShareAutoOffsetReset(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestShareGroupConfigs(t *testing.T) {
	b := Defaults()
	for _, c := range []struct {
		set  map[string]string
		fail bool
	}{
		{map[string]string{"share.auto.offset.reset": "by_duration:PT10M"}, false},
		{map[string]string{"share.auto.offset.reset": "by_duration:10m"}, true},
		{map[string]string{"share.delivery.count.limit": "3"}, false},
		{map[string]string{"share.delivery.count.limit": "0"}, true},
		{map[string]string{"share.delivery.count.limit": "11"}, true},
		{map[string]string{"share.isolation.level": "read_committed"}, false},
		{map[string]string{"share.isolation.level": "serializable"}, true},
		{map[string]string{"share.record.lock.duration.ms": "20000"}, false},
		{map[string]string{"share.record.lock.duration.ms": "5000"}, true}, // below group.share.min.record.lock.duration.ms
		{map[string]string{"share.session.timeout.ms": "50000"}, false},
		{map[string]string{"share.session.timeout.ms": "70000"}, true},    // above group.share.max.session.timeout.ms
		{map[string]string{"share.heartbeat.interval.ms": "16000"}, true}, // above group.share.max.heartbeat.interval.ms
	} {
		err := CheckGroupConfigs(c.set, b)
		if (err != nil) != c.fail {
			t.Errorf("%v: %v", c.set, err)
		}
	}
	if v, src := b.GroupConfig(map[string]string{}, "share.delivery.count.limit"); v != "5" || src != SourceDefault {
		t.Errorf("default share.delivery.count.limit %q %v", v, src)
	}
	if err := checkShareAssignors("simple"); err != nil {
		t.Error(err)
	}
	if checkShareAssignors("simple,range") == nil || checkShareAssignors("uniform") == nil {
		t.Error("assignor other than simple accepted")
	}
}
