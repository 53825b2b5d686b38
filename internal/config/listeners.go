package config

// Listeners as Kafka defines them (KafkaConfig: listeners,
// advertised.listeners, listener.security.protocol.map,
// inter.broker.listener.name, security.inter.broker.protocol): several
// named Kafka listeners, each with a security protocol, plus the
// CONTROLLER listener of the metadata quorum. docs/security.md describes
// how they are used.

import (
	"fmt"
	"net"
	"strings"
)

// Security protocols (Kafka's SecurityProtocol).
const (
	ProtoPlaintext     = "PLAINTEXT"
	ProtoSSL           = "SSL"
	ProtoSASLPlaintext = "SASL_PLAINTEXT"
	ProtoSASLSSL       = "SASL_SSL"
)

// ControllerListenerName is the listener of the controller quorum
// (--controller-listen); it is not a Kafka listener.
const ControllerListenerName = "CONTROLLER"

// MaxListeners bounds the Kafka listeners of one node.
const MaxListeners = 16

// Listener is one Kafka listener: an entry of listeners (or of
// advertised.listeners) with its security protocol.
type Listener struct {
	// Name is the listener name, upper-cased as Kafka's
	// ListenerName.normalised does.
	Name string
	// Addr is host:port: the bound address (listeners) or the address
	// given to clients and brokers (advertised.listeners).
	Addr string
	// Protocol is the listener's security protocol
	// (listener.security.protocol.map): PLAINTEXT, SSL, SASL_PLAINTEXT or
	// SASL_SSL.
	Protocol string
}

// TLS reports whether the listener's protocol runs over TLS.
func (l Listener) TLS() bool { return l.Protocol == ProtoSSL || l.Protocol == ProtoSASLSSL }

// SASL reports whether the listener's protocol authenticates with SASL.
func (l Listener) SASL() bool {
	return l.Protocol == ProtoSASLPlaintext || l.Protocol == ProtoSASLSSL
}

// parseListenerList splits "NAME://host:port,..." into (name, addr) pairs,
// names upper-cased.
func parseListenerList(v string) []Listener {
	var out []Listener
	for _, e := range listElems(v) {
		name, addr := splitListener(e)
		out = append(out, Listener{Name: strings.ToUpper(strings.TrimSpace(name)), Addr: strings.TrimSpace(addr)})
	}
	return out
}

// primaryListener is the index, among Kafka listeners, of the one --listen
// (and Broker.Listen) stands for: the one named PLAINTEXT, else the first.
func primaryListener(ls []Listener) int {
	for i, l := range ls {
		if l.Name == ProtoPlaintext {
			return i
		}
	}
	return 0
}

// ControllerProtocol returns the security protocol of the CONTROLLER
// listener (listener.security.protocol.map; PLAINTEXT if unmapped):
// PLAINTEXT or SSL (TLS, with ssl.client.auth=required for mTLS between
// voters and the brokers that reach them). SASL on the controller port is
// an error.
func (b *Broker) ControllerProtocol() (string, error) {
	switch p := b.SecurityProtocolMap()[ControllerListenerName]; p {
	case "", ProtoPlaintext:
		return ProtoPlaintext, nil
	case ProtoSSL:
		return ProtoSSL, nil
	default:
		return "", fmt.Errorf("listener.security.protocol.map: CONTROLLER:%s: the controller listener serves PLAINTEXT or SSL (docs/security.md)", p)
	}
}

// SecurityProtocolMap returns listener.security.protocol.map (Kafka's
// default if unset) by upper-cased listener name.
func (b *Broker) SecurityProtocolMap() map[string]string {
	v, ok := b.Props["listener.security.protocol.map"]
	if !ok {
		d, _ := BrokerDef("listener.security.protocol.map")
		v = d.Default
	}
	m := map[string]string{}
	for _, e := range listElems(v) {
		name, proto, _ := strings.Cut(e, ":")
		m[strings.ToUpper(strings.TrimSpace(name))] = strings.ToUpper(strings.TrimSpace(proto))
	}
	return m
}

// KafkaListeners returns the node's Kafka listeners (every entry of
// listeners but CONTROLLER), in their order, with their protocols. Without
// listeners it is one PLAINTEXT listener on Listen. Listen (--listen)
// replaces the address of the PLAINTEXT entry, or of the first one. An
// error names the key at fault: a listener without a protocol in
// listener.security.protocol.map, two listeners on one port, too many.
func (b *Broker) KafkaListeners() ([]Listener, error) {
	var ls []Listener
	if v, ok := b.Props["listeners"]; ok {
		for _, l := range parseListenerList(v) {
			if l.Name != ControllerListenerName {
				ls = append(ls, l)
			}
		}
	}
	if len(ls) == 0 {
		ls = []Listener{{Name: ProtoPlaintext}}
	}
	if len(ls) > MaxListeners {
		return nil, fmt.Errorf("listeners: %d Kafka listeners, at most %d", len(ls), MaxListeners)
	}
	ls[primaryListener(ls)].Addr = b.Listen
	protos := b.SecurityProtocolMap()
	if _, err := b.ControllerProtocol(); err != nil {
		return nil, err
	}
	ports := map[string]string{}
	for i := range ls {
		l := &ls[i]
		p, ok := protos[l.Name]
		if !ok {
			return nil, fmt.Errorf("listeners: no security protocol for listener %s in listener.security.protocol.map", l.Name)
		}
		l.Protocol = p
		if err := CheckHostPort(l.Addr); err != nil {
			return nil, fmt.Errorf("listeners: %s://%s: %v", l.Name, l.Addr, err)
		}
		_, port, _ := net.SplitHostPort(l.Addr)
		if port != "0" {
			if other, dup := ports[port]; dup {
				return nil, fmt.Errorf("listeners: %s and %s use the same port %s", other, l.Name, port)
			}
			ports[port] = l.Name
		}
	}
	return ls, nil
}

// AdvertisedListeners returns, for every Kafka listener, the address given
// to clients and other brokers: its advertised.listeners entry, else the
// listener's own address (Kafka's default). A wildcard host is left as it
// is (the broker replaces it when it registers). An advertised name that
// is not a listener is an error, as in Kafka.
func (b *Broker) AdvertisedListeners() ([]Listener, error) {
	ls, err := b.KafkaListeners()
	if err != nil {
		return nil, err
	}
	v, ok := b.Props["advertised.listeners"]
	if !ok {
		return ls, nil
	}
	adv := parseListenerList(v)
	if len(adv) == 1 && adv[0].Name == "" {
		// A bare host:port (no name) advertises the primary listener.
		adv[0].Name = ls[primaryListener(ls)].Name
	}
	for _, a := range adv {
		if a.Name == ControllerListenerName {
			continue
		}
		found := false
		for i := range ls {
			if ls[i].Name == a.Name {
				ls[i].Addr, found = a.Addr, true
			}
		}
		if !found {
			return nil, fmt.Errorf("advertised.listeners: %s is not a listener name of listeners", a.Name)
		}
	}
	return ls, nil
}

// InterBrokerListenerName is the listener other brokers' followers fetch
// from (inter.broker.listener.name). Unset, it is the listener named after
// security.inter.broker.protocol if that is set (Kafka's rule), else
// PLAINTEXT if there is such a listener (Kafka's default), else the first
// Kafka listener (where Kafka would refuse to start).
func (b *Broker) InterBrokerListenerName() (string, error) {
	ls, err := b.KafkaListeners()
	if err != nil {
		return "", err
	}
	name := ""
	key := "inter.broker.listener.name"
	if v, ok := b.Props[key]; ok && strings.TrimSpace(v) != "" {
		name = strings.ToUpper(strings.TrimSpace(v))
	} else if v, ok := b.Props["security.inter.broker.protocol"]; ok && strings.TrimSpace(v) != "" {
		name, key = strings.ToUpper(strings.TrimSpace(v)), "security.inter.broker.protocol"
	}
	if name == "" {
		return ls[primaryListener(ls)].Name, nil
	}
	for _, l := range ls {
		if l.Name == name {
			return name, nil
		}
	}
	return "", fmt.Errorf("%s: %s is not a listener name of listeners", key, name)
}

// InterBrokerListener returns the inter-broker listener as this node
// advertises it.
func (b *Broker) InterBrokerListener() (Listener, error) {
	name, err := b.InterBrokerListenerName()
	if err != nil {
		return Listener{}, err
	}
	ls, err := b.AdvertisedListeners()
	if err != nil {
		return Listener{}, err
	}
	for _, l := range ls {
		if l.Name == name {
			return l, nil
		}
	}
	return Listener{}, fmt.Errorf("inter.broker.listener.name: %s is not a listener", name)
}

// CheckListeners checks the listener settings together (each key alone
// is checked by its definition): what KafkaListeners, AdvertisedListeners
// and InterBrokerListener would report.
func (b *Broker) CheckListeners() error {
	_, err := b.InterBrokerListener()
	return err
}
