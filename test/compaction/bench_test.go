package compaction

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

// BenchmarkProduceWhileCleaning measures produce throughput (100-byte
// records, acks=1, one client) to one topic while the log cleaner
// compacts another topic's ~400 MB dirty log on the same node, against the
// same produce with the cleaner idle, interleaved round by round. The
// cleaner is started by lowering the compacted topic's
// min.compaction.lag.ms, as an operator would.
//
//	go test ./test/compaction -run '^$' -bench ProduceWhileCleaning -benchtime 1x -v [-cleaner.rate BYTES]
func BenchmarkProduceWhileCleaning(b *testing.B) {
	props := filepath.Join(b.TempDir(), "server.properties")
	conf := "log.cleaner.backoff.ms=20\n"
	if *cleanerRate > 0 {
		conf += fmt.Sprintf("log.cleaner.io.max.bytes.per.second=%d\n", *cleanerRate)
	}
	if err := os.WriteFile(props, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	p := testproc.Start(b, testproc.Options{ExtraArgs: []string{"--config", props}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	adm := kadm.NewClient(p.Client(b))
	mustCreate := func(name string, parts int32, cfg map[string]*string) {
		resp, err := adm.CreateTopics(ctx, parts, 1, cfg, name)
		if err != nil || resp[name].Err != nil {
			b.Fatal(err, resp[name].Err)
		}
	}
	day := "86400000"
	mustCreate("dirty", 1, map[string]*string{"cleanup.policy": ptr("compact"), "segment.bytes": ptr("16777216"),
		"min.compaction.lag.ms": &day})
	mustCreate("load", 3, nil)
	setLag := func(v string) {
		if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.compaction.lag.ms", Value: &v}}, "dirty"); err != nil {
			b.Fatal(err)
		}
	}
	value := []byte(strings.Repeat("v", 80))
	produce := func(topic string, n int, keys int) (perSec float64) {
		cl := p.Client(b, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<20))
		defer cl.Close()
		t0 := time.Now()
		for i := 0; i < n; i++ {
			r := &kgo.Record{Value: value}
			if keys > 0 {
				r.Key = []byte(fmt.Sprintf("key-%09d", i%keys))
			}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		return float64(n) / time.Since(t0).Seconds()
	}
	passes := func() float64 { return metric(b, p.HTTPAddr(), "sluice_log_cleaner_passes_total") }
	const dirty, keys, load = 4_000_000, 400_000, 3_000_000
	var idle, busy []float64
	for round := 0; round < 3; round++ {
		produce("dirty", dirty, keys) // ~400 MB, 10% distinct keys
		idle = append(idle, produce("load", load, 0))
		before := passes()
		setLag("0")
		// Wait for the cleaner to take the log (its threads poll every
		// log.cleaner.backoff.ms when idle).
		deadline := time.Now().Add(30 * time.Second)
		for metric(b, p.HTTPAddr(), "sluice_log_cleaner_backlog_bytes") == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		busy = append(busy, produce("load", load, 0))
		overlapped := passes() == before // the pass was still running when the produce ended
		for passes() == before && time.Now().Before(deadline.Add(time.Minute)) {
			time.Sleep(100 * time.Millisecond)
		}
		setLag(day)
		b.Logf("round %d: idle %.0f rec/s, while cleaning %.0f rec/s, ratio %.2f (cleaning overlapped the whole produce: %v)",
			round, idle[round], busy[round], busy[round]/idle[round], overlapped)
	}
}

var cleanerRate = flag.Int64("cleaner.rate", 0, "log.cleaner.io.max.bytes.per.second of BenchmarkProduceWhileCleaning (0: unlimited)")

func ptr(s string) *string { return &s }

// metric reads one unlabelled sample from a node's /metrics.
func metric(b testing.TB, addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
