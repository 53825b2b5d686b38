package node

import (
	"fmt"
	"net"
	"strings"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/security"
)

// boundListener is a Kafka listener bound to its address.
type boundListener struct {
	ln  net.Listener
	cfg config.Listener
	pl  protocol.Listener
}

// listenKafka binds every Kafka listener (config.KafkaListeners) and
// prepares what the protocol layer needs to serve it. On error, the
// listeners already bound are closed.
func listenKafka(cfg *config.Broker, scram security.ScramLookup) ([]boundListener, error) {
	ls, err := cfg.KafkaListeners()
	if err != nil {
		return nil, err
	}
	var out []boundListener
	fail := func(err error) ([]boundListener, error) {
		for _, b := range out {
			b.ln.Close()
		}
		return nil, err
	}
	for _, l := range ls {
		pl, err := protocolListener(cfg, l, scram)
		if err != nil {
			return fail(err)
		}
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return fail(fmt.Errorf("listener %s: %w", l.Name, err))
		}
		out = append(out, boundListener{ln: ln, cfg: l, pl: pl})
	}
	return out, nil
}

// protocolListener is the protocol layer's view of a listener: its TLS
// configuration (SSL, SASL_SSL) and SASL mechanisms (SASL_*), SCRAM
// credentials coming from scram.
func protocolListener(cfg *config.Broker, l config.Listener, scram security.ScramLookup) (protocol.Listener, error) {
	pl := protocol.Listener{Name: l.Name}
	if l.SASL() {
		sc, err := security.ListenerSASL(cfg, l.Name, scram)
		if err != nil {
			return protocol.Listener{}, err
		}
		pl.SASL = sc
	}
	if l.TLS() {
		tc, err := security.ServerTLS(cfg, l.Name)
		if err != nil {
			return protocol.Listener{}, err
		}
		pl.TLS = tc
		pm, err := security.ListenerPrincipalMapper(cfg, l.Name)
		if err != nil {
			return protocol.Listener{}, err
		}
		pl.MapPrincipal = pm.MapCertificate
	}
	return pl, nil
}

// describeListeners renders the bound listeners for the start line:
// NAME://addr(PROTOCOL),...
func describeListeners(bls []boundListener) string {
	parts := make([]string, len(bls))
	for i, b := range bls {
		parts[i] = b.cfg.Name + "://" + b.ln.Addr().String()
		if b.cfg.Protocol != b.cfg.Name {
			parts[i] += "(" + b.cfg.Protocol + ")"
		}
	}
	return strings.Join(parts, ",")
}
