package broker

// Peer clients: requests this node's coordinators send to other brokers
// (the transaction coordinator's WriteTxnMarkers, Kafka's
// TransactionMarkerChannelManager), over the same Transport and
// inter-broker listener as the follower fetchers. One client per node and
// client id is kept and reused (each coordinator has its own, as Kafka's
// managers each have their own NetworkClient, so that one never closes a
// client another is using); it is replaced when the node's address
// changes and closed when the broker closes.

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// peerCache holds the peer clients by node id and client id.
type peerCache struct {
	mu      sync.Mutex
	closed  bool
	clients map[peerKey]peerEntry
}

// peerKey names one peer client: the node it reaches and the client id it
// sends.
type peerKey struct {
	node     int32
	clientID string
}

type peerEntry struct {
	addr string
	cl   PeerClient
}

// Peer returns a client for broker node (this node included: a request
// to itself goes over its own inter-broker listener), reached at its
// endpoint on inter.broker.listener.name as the current metadata image
// gives it. The client is shared by the callers with the same clientID:
// requests through it are sent one at a time; it reconnects by itself
// after a failure. Callers with another clientID get a client of their
// own. It fails for a node the
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
	k := peerKey{node, clientID}
	if e, ok := c.clients[k]; ok {
		if e.addr == addr {
			return e.cl, nil
		}
		e.cl.Close()
	}
	if c.clients == nil {
		c.clients = map[peerKey]peerEntry{}
	}
	cl := b.transport.Dial(addr, clientID)
	c.clients[k] = peerEntry{addr: addr, cl: cl}
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
