// Package throttle tests the replication throttles (KIP-73) on real
// `sluice serve` processes: a follower that has fallen ~10 MB behind
// catches up at leader.replication.throttled.rate on a topic whose
// leader.replication.throttled.replicas is * (and at
// follower.replication.throttled.rate on a topic whose
// follower.replication.throttled.replicas names it), and much faster on a
// topic with no throttled replicas, at the same time on the same brokers.
package throttle

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

const (
	rate       = 1000000 // leader.replication.throttled.rate, bytes/s
	valueBytes = 10000
	records    = 1000 // ~10 MB per topic
)

// TestLeaderThrottle throttles on the leader (broker 1) every replica of
// the throttled topic.
func TestLeaderThrottle(t *testing.T) {
	catchUp(t, "leader.replication.throttled.rate", map[string]string{"leader.replication.throttled.replicas": "*"}, "leader")
}

// TestFollowerThrottle throttles on the follower (broker 2) its replica
// of the throttled topic, named as partition:broker.
func TestFollowerThrottle(t *testing.T) {
	catchUp(t, "follower.replication.throttled.rate", map[string]string{"follower.replication.throttled.replicas": "0:2"}, "follower")
}

// catchUp runs the scenario with rateKey set to rate on both brokers and
// the throttled topic's configs, and checks the metrics of side's broker.
func catchUp(t *testing.T, rateKey string, configs map[string]string, side string) {
	// Node 1 is the only controller voter, so the metadata quorum keeps
	// working while broker 2 is down.
	c := testcluster.Start(t, testcluster.Options{Nodes: 2, Voters: 1, Props: map[string]string{
		"broker.session.timeout.ms":    "2000",
		"broker.heartbeat.interval.ms": "300",
		"auto.leader.rebalance.enable": "false",
		rateKey:                        fmt.Sprint(rate),
	}})
	const slow, fast = "throttled", "free"
	c.CreateTopic(slow, 1, -1, configs, [][]int32{{1, 2}})
	c.CreateTopic(fast, 1, -1, nil, [][]int32{{1, 2}})

	// Broker 2 falls behind by ~10 MB on each topic.
	c.Node(2).Stop()
	for _, topic := range []string{slow, fast} {
		testcluster.WaitFor(t, 20*time.Second, topic+": broker 2 out of the ISR", func() (bool, string) {
			m, err := c.Meta(topic)
			if err != nil {
				return false, err.Error()
			}
			return len(m[0].ISR) == 1 && m[0].Leader == 1, m[0].String()
		})
	}
	cl := c.Client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{slow, fast} {
		var recs []*kgo.Record
		for range records {
			value := make([]byte, valueBytes)
			rand.Read(value) // incompressible
			recs = append(recs, &kgo.Record{Topic: topic, Value: value})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", topic, err)
		}
	}
	bytesPer := map[string]float64{}
	for _, topic := range []string{slow, fast} {
		bytesPer[topic] = float64(logBytes(t, c.Node(1), topic)) / records
	}

	// Watch broker 2's LEOs (its own /api/v1/node) as it catches up.
	c.Node(2).Restart()
	// A sample's LEOs were read at some time between sent (the request
	// was sent) and at (its answer came): on a loaded machine the two may
	// be far apart, so the rate is checked over both bounds of the
	// interval, not over the answer times alone.
	type sample struct {
		sent, at time.Time
		leo      map[string]int64
	}
	var samples []sample
	deadline := time.Now().Add(40 * time.Second)
	for {
		sent := time.Now()
		leo, err := nodeLEOs(c.Node(2))
		if err == nil {
			samples = append(samples, sample{sent, time.Now(), leo})
			if leo[slow] >= records && leo[fast] >= records {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker 2 not caught up: %v", samples[len(samples)-1].leo)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// progress returns the time topic's LEO first left its starting
	// value and the time it reached the log end.
	progress := func(topic string) (start, done time.Time) {
		for _, s := range samples {
			if start.IsZero() && s.leo[topic] > samples[0].leo[topic] {
				start = s.at
			}
			if done.IsZero() && s.leo[topic] >= records {
				done = s.at
			}
		}
		return start, done
	}
	// The throttled topic's rate after its first second, up to 90% of
	// the way (before the tail). Records arrive in fetch-sized steps, so
	// both ends are taken at a step (the first sample showing it): the
	// steps in between, and the one at the end, took that time.
	start, done := progress(slow)
	var from, to *sample
	for i := 1; i < len(samples); i++ {
		s := &samples[i]
		if s.leo[slow] == samples[i-1].leo[slow] || s.at.Before(start.Add(time.Second)) {
			continue
		}
		if from == nil {
			from = s
		} else if to == nil || to.leo[slow] < records*9/10 {
			to = s
		}
	}
	if from == nil || to == nil || to.sent.Sub(from.at) < 3*time.Second {
		t.Fatalf("throttled catch-up too short to measure (%v from first progress to the end); samples %d", done.Sub(start), len(samples))
	}
	moved := float64(to.leo[slow]-from.leo[slow]) * bytesPer[slow]
	got := moved / to.at.Sub(from.at).Seconds()
	// The slowest and the fastest rate the samples allow.
	lo, hi := moved/to.at.Sub(from.sent).Seconds(), moved/to.sent.Sub(from.at).Seconds()
	t.Logf("throttled: %.0f B/s (%.0f to %.0f with the samples' read times) from offset %d to %d over %v (whole catch-up %v)",
		got, lo, hi, from.leo[slow], to.leo[slow], to.at.Sub(from.at).Round(time.Millisecond), done.Sub(start).Round(time.Millisecond))
	if hi < 0.8*rate || lo > 1.2*rate {
		t.Errorf("throttled catch-up at %.0f to %.0f B/s, want %d +- 20%%", lo, hi, rate)
	}

	fs, fd := progress(fast)
	took := max(fd.Sub(fs), 100*time.Millisecond) // a sample's resolution
	free := float64(records) * bytesPer[fast] / took.Seconds()
	t.Logf("unthrottled: at least %.0f B/s (caught up in %v, sampled every 100 ms)", free, fd.Sub(fs).Round(time.Millisecond))
	if free < 3*got {
		t.Errorf("unthrottled catch-up at %.0f B/s, not much faster than throttled %.0f B/s", free, got)
	}

	// The throttling broker's metrics count the throttled bytes.
	node := c.Node(1)
	if side == "follower" {
		node = c.Node(2)
	}
	m := metricsText(t, node)
	if !strings.Contains(m, `sluice_replication_throttled_bytes_total{side="`+side+`"}`) {
		t.Errorf("no %s throttled-bytes metric:\n%s", side, grep(m, "replication_throttled"))
	}
	t.Logf("%s metrics:\n%s", side, grep(m, "replication_throttled"))
}

// logBytes is the size of topic's partition 0 log segments on p.
func logBytes(t *testing.T, p *testproc.Proc, topic string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(p.DataDir(), topic+"-0", "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segments of %s: %v", topic, err)
	}
	var n int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// nodeLEOs returns the LEO of partition 0 of each topic p hosts, from its
// /api/v1/node.
func nodeLEOs(p *testproc.Proc) (map[string]int64, error) {
	resp, err := http.Get("http://" + p.HTTPAddr() + "/api/v1/node")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v struct {
		Partitions []struct {
			Topic        string `json:"topic"`
			Partition    int32  `json:"partition"`
			LogEndOffset int64  `json:"logEndOffset"`
		} `json:"partitions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, pt := range v.Partitions {
		if pt.Partition == 0 {
			out[pt.Topic] = pt.LogEndOffset
		}
	}
	return out, nil
}

func metricsText(t *testing.T, p *testproc.Proc) string {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return sb.String()
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
