package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/config"
)

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
// The Kafka port is fixed before the start because the node advertises
// it in its metadata.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestNodeInProcess starts a single node in the test process, produces and
// consumes a record with franz-go, checks the HTTP port answers, and
// closes the node: Close and then Wait return nil, and the data
// directory's lock is free again for a second start.
func TestNodeInProcess(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = freeAddr(t)
	cfg.HTTP = "127.0.0.1:0"
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Start(cfg, Options{Logger: logger, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.KafkaAddrs()["PLAINTEXT"]; got == nil || got.String() != cfg.Listen {
		t.Fatalf("KafkaAddrs: %v, want PLAINTEXT %s", n.KafkaAddrs(), cfg.Listen)
	}
	resp, err := http.Get("http://" + n.HTTPAddr().String() + "/api/v1/node")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/node: %s", resp.Status)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Listen), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatal("produce:", err)
	}
	var got []string
	for len(got) == 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal("consume:", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 1 || got[0] != "hello" {
		t.Fatalf("consumed %q, want [hello]", got)
	}
	cl.Close()

	if err := n.Close(); err != nil {
		t.Fatal("Close:", err)
	}
	if err := n.Wait(); err != nil {
		t.Fatal("Wait after Close:", err)
	}
	// Everything was released: the same directory and port start again.
	n2, err := Start(cfg, Options{Logger: logger})
	if err != nil {
		t.Fatal("restart:", err)
	}
	if err := n2.Close(); err != nil {
		t.Fatal("Close after restart:", err)
	}
}

// TestStandaloneServesAppliedMetadata restarts a single node holding 20
// topics: when Start returns (its Kafka listener open), the broker has
// applied its metadata — every topic the image names resolves by id —
// so a Fetch by topic id (KIP-516) right after the start does not get
// UNKNOWN_TOPIC_ID for a topic Metadata lists.
func TestStandaloneServesAppliedMetadata(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = freeAddr(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Start(cfg, Options{Logger: logger, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Listen))
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	for i := range 20 {
		topics = append(topics, fmt.Sprintf("t%02d", i))
	}
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 2, 1, nil, topics...); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n, err = Start(cfg, Options{Logger: logger, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	b := n.Broker()
	select {
	case <-b.Applied():
	default:
		t.Fatal("Start returned before the broker applied its metadata")
	}
	im := b.Image()
	for _, name := range topics {
		tm, ok := im.Topics[name]
		if !ok {
			t.Fatalf("topic %s missing from the image after the restart", name)
		}
		if got, ok := b.TopicName(tm.ID); !ok || got != name {
			t.Errorf("topic %s's id does not resolve right after the start (%q, %v)", name, got, ok)
		}
	}
}
