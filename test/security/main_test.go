// Package security runs real `sluice serve` processes with TLS and SASL
// listeners and drives them with franz-go (and kcat when installed), as
// docs/security.md describes; clients_test.go also drives sarama, kafka-go
// and KafkaJS.
package security

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// addr is a loopback address on port.
func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// writeProps writes a server.properties file.
func writeProps(t *testing.T, props map[string]string) string {
	t.Helper()
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&sb, "%s=%s\n", k, props[k])
	}
	p := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(p, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startNode starts a single node whose --listen (PLAINTEXT, used for the
// readiness probe) is plainPort, with props.
func startNode(t *testing.T, plainPort int, props map[string]string) *testproc.Proc {
	t.Helper()
	return testproc.Start(t, testproc.Options{ListenPort: plainPort, ExtraArgs: []string{"--config", writeProps(t, props)}})
}

// metric sums the samples of a metric (every label set) on a node's
// /metrics.
func metric(t *testing.T, p *testproc.Proc, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		sum += f
	}
	return sum
}

func ctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// client returns a franz-go client, closed at the end of the test.
func client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.RetryTimeout(15 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceConsume creates topic, produces values to it through pc and
// reads them back from the start with a client of consumeOpts.
func produceConsume(t *testing.T, topic string, values [][]byte, pc *kgo.Client, consumeOpts ...kgo.Opt) {
	t.Helper()
	if _, err := kadm.NewClient(pc).CreateTopic(ctx(t, 30*time.Second), 1, -1, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	produceConsumeExisting(t, topic, values, pc, consumeOpts...)
}

// produceConsumeExisting is produceConsume on an existing topic.
func produceConsumeExisting(t *testing.T, topic string, values [][]byte, pc *kgo.Client, consumeOpts ...kgo.Opt) {
	t.Helper()
	c := ctx(t, 60*time.Second)
	for _, v := range values {
		if err := pc.ProduceSync(c, &kgo.Record{Topic: topic, Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	cc := client(t, append(consumeOpts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	var got [][]byte
	for len(got) < len(values) {
		fs := cc.PollFetches(c)
		if c.Err() != nil {
			t.Fatalf("consume %s: %d of %d records before the deadline", topic, len(got), len(values))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	for i := range values {
		if string(got[i]) != string(values[i]) {
			t.Fatalf("record %d of %s differs (%d bytes, want %d)", i, topic, len(got[i]), len(values[i]))
		}
	}
}
