package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transport carries this node's own requests to other brokers: its
// follower fetchers' Fetch and ListOffsets. Production dials the leader's
// inter-broker listener over TCP (interbroker.go); a simulator passes the
// requests as messages, so that replication runs on its clock and network.
type Transport interface {
	// Dial returns a client for the broker whose inter-broker endpoint
	// is addr. It connects lazily, on the first request.
	Dial(addr, clientID string) PeerClient
}

// PeerClient sends requests to one other broker, one at a time.
type PeerClient interface {
	// Request sends req and returns its response, or an error once ctx
	// ends or the connection fails (the next request reconnects).
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	// Traffic returns the bytes sent and received so far.
	Traffic() (sent, received int64)
	// Close closes the connection.
	Close() error
}

// tcpTransport is the production Transport.
type tcpTransport struct{ inter *interBroker }

func (t tcpTransport) Dial(addr, clientID string) PeerClient { return t.inter.client(addr, clientID) }
