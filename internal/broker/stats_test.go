package broker_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
)

func TestSelfBrokerAdvertisesHTTP(t *testing.T) {
	for _, c := range []struct{ http, want string }{
		{"", ""},
		{"127.0.0.1:9094", "127.0.0.1:9094"},
		{"127.0.0.1:0", ""}, // no fixed port to advertise
		{"0.0.0.0:9094", "*:9094"},
		{":9094", "*:9094"},
	} {
		cfg := config.Defaults()
		cfg.Listen, cfg.HTTP = "127.0.0.1:9092", c.http
		self, err := broker.SelfBroker(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(c.want, "*:") {
			if !strings.HasSuffix(self.HTTP, c.want[1:]) || strings.HasPrefix(self.HTTP, "0.0.0.0") || strings.HasPrefix(self.HTTP, ":") {
				t.Errorf("--http %q advertised as %q", c.http, self.HTTP)
			}
		} else if self.HTTP != c.want {
			t.Errorf("--http %q advertised as %q, want %q", c.http, self.HTTP, c.want)
		}
	}
}

func TestTopicCountersConcurrent(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:1"
	b, err := broker.Open(broker.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				b.CountProduce("a", 10, 2)
				b.CountFetch("a", 5, 1)
				b.CountFetch("b", 0, 0) // nothing returned: not counted
			}
		}()
	}
	wg.Wait()
	got := b.TopicCounters()
	if c := got["a"]; c != (broker.TopicCounters{BytesIn: 80000, RecordsIn: 16000, BytesOut: 40000, RecordsOut: 8000}) {
		t.Fatalf("%+v", c)
	}
	if _, ok := got["b"]; ok {
		t.Fatalf("empty fetches created topic b: %+v", got)
	}
}
