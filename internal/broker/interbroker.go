package broker

// The inter-broker client: how this node's follower fetchers reach a
// leader. They dial the leader's endpoint on inter.broker.listener.name
// (config.Broker.InterBrokerListenerName; Kafka's ReplicaFetcherThread
// does the same with the leader's endpoint for that listener).

import (
	"net"
	"strconv"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// interBroker is what a fetcher needs to reach other brokers.
type interBroker struct {
	// listener is the inter-broker listener name.
	listener string
}

func newInterBroker(cfg *config.Broker) (*interBroker, error) {
	name, err := cfg.InterBrokerListenerName()
	if err != nil {
		return nil, err
	}
	return &interBroker{listener: name}, nil
}

// addr is br's inter-broker endpoint as host:port. A broker registered
// without endpoints (older records) or without that listener is dialed at
// its Host and Port, which is its own inter-broker endpoint.
func (ib *interBroker) addr(br metadata.Broker) string {
	e, ok := br.Endpoint(ib.listener)
	if !ok {
		e = metadata.Endpoint{Host: br.Host, Port: br.Port}
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// client returns a client for a leader at addr.
func (ib *interBroker) client(addr, clientID string) *protocol.Client {
	return protocol.NewClient(addr, clientID)
}
