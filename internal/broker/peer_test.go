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

// TestPeerClientIDsKeepTheirClients: two coordinators reaching one node
// with their own client ids (the transaction markers and the remote log
// metadata store) each keep their client: asking for one never closes the
// other's while it may be in use.
func TestPeerClientIDsKeepTheirClients(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:19092"
	ft := &fakeTransport{}
	b, err := broker.Open(broker.Options{Config: cfg, Transport: ft})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	markers, err := b.Peer(b.NodeID(), "sluice-txn-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	meta, err := b.Peer(b.NodeID(), "sluice-remote-log-metadata")
	if err != nil {
		t.Fatal(err)
	}
	if markers == meta {
		t.Fatal("two client ids share one client")
	}
	if again, _ := b.Peer(b.NodeID(), "sluice-txn-coordinator"); again != markers {
		t.Fatal("the first client id's client was replaced")
	}
	for _, p := range ft.clients {
		if p.closed {
			t.Fatalf("a client in use was closed: %+v", ft.clients)
		}
	}
	if len(ft.clients) != 2 {
		t.Fatalf("%d clients dialed, want 2", len(ft.clients))
	}
}
