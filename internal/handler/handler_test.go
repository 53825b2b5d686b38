package handler_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/protocol"
)

// node is an in-process broker serving Kafka on a loopback port.
type node struct {
	t    *testing.T
	dir  string
	addr string
	b    *broker.Broker
	h    *handler.Handlers
	srv  *protocol.Server
}

// startNode starts a broker on dir (a new temp dir if empty) with extra
// broker properties.
func startNode(t *testing.T, dir string, props map[string]string) *node {
	t.Helper()
	return startNodeClock(t, dir, props, nil)
}

// startNodeClock is startNode on clk (nil: the real clock).
func startNodeClock(t *testing.T, dir string, props map[string]string, clk clock.Clock) *node {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.DataDir = dir
	cfg.Listen = ln.Addr().String()
	for k, v := range props {
		cfg.Props[k] = v
	}
	b, err := broker.Open(broker.Options{Config: cfg, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	reg := protocol.NewRegistry()
	hs := handler.Register(reg, b)
	srv := protocol.NewServer(protocol.Config{}, reg)
	go srv.Serve(ln)
	n := &node{t: t, dir: dir, addr: ln.Addr().String(), b: b, h: hs, srv: srv}
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	if n.srv != nil {
		n.srv.Close()
		n.h.Close()
		n.b.Close()
		n.srv = nil
	}
}

// client returns a franz-go client for n, closed at the end of the test.
func (n *node) client(opts ...kgo.Opt) *kgo.Client {
	n.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.addr), kgo.RetryTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(cl.Close)
	return cl
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// request sends a raw request and returns the response.
func request[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Request(ctx(t), req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp.(R)
}
