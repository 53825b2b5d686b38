package config

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// CheckRoles checks the KRaft role settings against the quorum the node
// will run in, with Kafka's rules (KafkaConfig's validation of
// process.roles against controller.quorum.voters), and refuses the
// settings sluice would otherwise turn into a second cluster: a node that
// names a controller quorum it cannot reach as configured must not start
// a single-node cluster of its own.
//
//   - process.roles with controller: node.id is one of the voters (when
//     any are listed);
//   - process.roles without controller: node.id is not a voter, and
//     voters are listed or controller.quorum.bootstrap.servers names the
//     quorum (a broker-only node follows a quorum, never forms one);
//   - process.roles without broker: refused (sluice has no
//     controller-only nodes: every node hosts partitions);
//   - controller.quorum.bootstrap.servers (KIP-853) without
//     controller.quorum.voters: naming only this node's own CONTROLLER
//     listener (Kafka's standalone combined node, the stock
//     server.properties), the node is a quorum of itself; naming other
//     controllers, the node follows the quorum they answer for (a node
//     with a CONTROLLER listener as a prospective voter, to be added
//     with AddRaftVoter), as Kafka's observers do (QuorumBootstrap).
//
// Flags have been applied: --voters is controller.quorum.voters, and the
// voters of a formatted directory are set too (node.ApplyFormat).
func (b *Broker) CheckRoles() error {
	inVoters := slices.ContainsFunc(b.Voters, func(v Voter) bool { return v.ID == b.NodeID })
	if v := strings.TrimSpace(b.Props["process.roles"]); v != "" {
		roles := listElems(v)
		controller, broker := slices.Contains(roles, "controller"), slices.Contains(roles, "broker")
		switch {
		case !broker:
			return fmt.Errorf("process.roles=%s: sluice has no controller-only nodes (every node hosts partitions): use process.roles=broker,controller", v)
		case controller && len(b.Voters) > 0 && !inVoters:
			return fmt.Errorf("process.roles=%s includes controller, but node.id %d is not one of the voters in controller.quorum.voters (--voters) %s: add it, or set process.roles=broker", v, b.NodeID, votersString(b.Voters))
		case !controller && inVoters:
			return fmt.Errorf("process.roles=%s has no controller role, but node.id %d is one of the voters in controller.quorum.voters (--voters): set process.roles=broker,controller, or take it out of the voters", v, b.NodeID)
		case !controller && len(b.Voters) == 0 && strings.TrimSpace(b.Props["controller.quorum.bootstrap.servers"]) == "":
			return fmt.Errorf("process.roles=%s: a broker-only node follows a controller quorum, and none is configured: list the quorum in controller.quorum.voters (--voters) as id@host:port,..., or its controllers in controller.quorum.bootstrap.servers", v)
		case !controller && len(b.Voters) == 0:
			if _, self := b.QuorumBootstrap(); self {
				return fmt.Errorf("process.roles=%s: controller.quorum.bootstrap.servers=%s names this node's own CONTROLLER listener, but a broker-only node has no controller: name the quorum's controllers", v, b.Props["controller.quorum.bootstrap.servers"])
			}
		}
	}
	return nil
}

// QuorumBootstrap returns controller.quorum.bootstrap.servers (KIP-853)
// when no controller.quorum.voters are set, and whether they name only
// this node's own CONTROLLER listener (self: the node is a quorum of
// itself, Kafka's standalone combined node). nil: no bootstrap servers,
// or voters are set (they win).
func (b *Broker) QuorumBootstrap() (addrs []string, self bool) {
	bs := strings.TrimSpace(b.Props["controller.quorum.bootstrap.servers"])
	if bs == "" || len(b.Voters) > 0 {
		return nil, false
	}
	addrs = listElems(bs)
	self = true
	for _, a := range addrs {
		self = self && sameListener(a, b.ControllerListen)
	}
	return addrs, self
}

// votersString is the voters in controller.quorum.voters' form.
func votersString(vs []Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%d@%s", v.ID, v.Addr)
	}
	return strings.Join(parts, ",")
}

// sameListener reports whether addr (host:port) reaches the listener at
// listen (host:port, an empty or wildcard host meaning every interface):
// the same port, and a loopback name, the same host, or, for a wildcard
// listener, an address of one of this machine's interfaces.
func sameListener(addr, listen string) bool {
	if listen == "" {
		return false
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	lh, lp, err := net.SplitHostPort(listen)
	if err != nil || p != lp {
		return false
	}
	if h == lh || isLoopback(h) && (isLoopback(lh) || isWildcard(lh)) {
		return true
	}
	if !isWildcard(lh) {
		return false
	}
	ip := net.ParseIP(h)
	if ip == nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

func isLoopback(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func isWildcard(h string) bool {
	if h == "" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsUnspecified()
}
