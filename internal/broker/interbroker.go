package broker

// The inter-broker client: how this node's follower fetchers reach a
// leader. They dial the leader's endpoint on inter.broker.listener.name
// (config.Broker.InterBrokerListenerName; Kafka's ReplicaFetcherThread
// does the same with the leader's endpoint for that listener).

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/security"
)

// interBroker is what a fetcher needs to reach other brokers.
type interBroker struct {
	// listener is the inter-broker listener name.
	listener string
	// tls is set when that listener is SSL or SASL_SSL: the broker's own
	// key store as client certificate, its trust store for the leader's
	// (security.ClientTLS).
	tls *tls.Config
	// sasl is set when that listener is SASL_PLAINTEXT or SASL_SSL:
	// sasl.mechanism.inter.broker.protocol with the listener's JAAS
	// username and password (security.InterBrokerSASL).
	sasl sasl.Mechanism
}

func newInterBroker(cfg *config.Broker) (*interBroker, error) {
	l, err := cfg.InterBrokerListener()
	if err != nil {
		return nil, err
	}
	ib := &interBroker{listener: l.Name}
	if l.TLS() {
		if ib.tls, err = security.ClientTLS(cfg, l.Name); err != nil {
			return nil, fmt.Errorf("inter-broker listener: %w", err)
		}
	}
	if l.SASL() {
		if ib.sasl, err = security.InterBrokerSASL(cfg, l.Name); err != nil {
			return nil, fmt.Errorf("inter-broker listener: %w", err)
		}
	}
	return ib, nil
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
	cl := protocol.NewClient(addr, clientID)
	if ib.tls != nil {
		cl.TLS = security.ForHost(ib.tls, addr)
	}
	cl.SASL = ib.sasl
	return cl
}
