package broker

// Peer clients: requests this node's coordinators send to other brokers
// (the transaction coordinator's WriteTxnMarkers, Kafka's
// TransactionMarkerChannelManager), over the same Transport and
// inter-broker listener as the follower fetchers. One client per node is
// kept and reused; it is replaced when the node's address changes and
// closed when the broker closes.

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// peerCache holds the peer clients by node id.
type peerCache struct {
	mu      sync.Mutex
	closed  bool
	clients map[int32]peerEntry
}

type peerEntry struct {
	addr, clientID string
	cl             PeerClient
}

// Peer returns a client for broker node (this node included: a request
// to itself goes over its own inter-broker listener), reached at its
// endpoint on inter.broker.listener.name as the current metadata image
// gives it. The client is shared: requests through it are sent one at a
// time; it reconnects by itself after a failure. It fails for a node the
// image does not know and once the broker is closed (BROKER_NOT_AVAILABLE).
func (b *Broker) Peer(node int32, clientID string) (PeerClient, error) {
	br, ok := b.Image().Brokers[node]
	if !ok {
		return nil, fmt.Errorf("peer %d: %w", node, kerr.BrokerNotAvailable)
	}
	addr := b.inter.addr(br)
	c := &b.peers
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("peer %d: broker closed: %w", node, kerr.BrokerNotAvailable)
	}
	if e, ok := c.clients[node]; ok {
		if e.addr == addr && e.clientID == clientID {
			return e.cl, nil
		}
		e.cl.Close()
	}
	if c.clients == nil {
		c.clients = map[int32]peerEntry{}
	}
	cl := b.transport.Dial(addr, clientID)
	c.clients[node] = peerEntry{addr: addr, clientID: clientID, cl: cl}
	return cl, nil
}

// closePeers closes every peer client; Peer fails from then on.
func (b *Broker) closePeers() {
	c := &b.peers
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, e := range c.clients {
		e.cl.Close()
	}
	c.clients = nil
}
