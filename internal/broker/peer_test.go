package broker_test

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
)

// fakeTransport hands out clients that record being closed.
type fakeTransport struct {
	mu      sync.Mutex
	clients []*fakePeer
}

type fakePeer struct {
	addr   string
	closed bool
}

func (f *fakeTransport) Dial(addr, _ string) broker.PeerClient {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &fakePeer{addr: addr}
	f.clients = append(f.clients, p)
	return p
}

func (p *fakePeer) Request(context.Context, kmsg.Request) (kmsg.Response, error) { return nil, nil }
func (p *fakePeer) Traffic() (int64, int64)                                      { return 0, 0 }
func (p *fakePeer) Close() error                                                 { p.closed = true; return nil }

// TestPeer: one client per node, dialed at its inter-broker endpoint and
// reused; unknown nodes fail; the clients are closed with the broker.
func TestPeer(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:19092"
	ft := &fakeTransport{}
	b, err := broker.Open(broker.Options{Config: cfg, Transport: ft})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := b.Peer(b.NodeID(), "x")
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := b.Peer(b.NodeID(), "x")
	if c1 != c2 || len(ft.clients) != 1 || ft.clients[0].addr != "127.0.0.1:19092" {
		t.Fatalf("clients %+v", ft.clients)
	}
	if _, err := b.Peer(99, "x"); err == nil {
		t.Fatal("unknown node")
	}
	b.Close()
	if !ft.clients[0].closed {
		t.Fatal("not closed with the broker")
	}
	if _, err := b.Peer(b.NodeID(), "x"); err == nil {
		t.Fatal("peer after close")
	}
}
