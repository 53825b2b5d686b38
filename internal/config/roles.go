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
//     voters are listed (a broker-only node follows a quorum);
//   - process.roles without broker: refused (sluice has no
//     controller-only nodes: every node hosts partitions);
//   - controller.quorum.bootstrap.servers (KIP-853) without
//     controller.quorum.voters: accepted only when it names this node's
//     own CONTROLLER listener (Kafka's standalone combined node, the
//     stock server.properties), which sluice runs as a single-node
//     cluster; any other controller is refused, naming the key.
//
// Flags have been applied: --voters is controller.quorum.voters.
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
		case !controller && len(b.Voters) == 0:
			why := "and none is configured"
			if bs := strings.TrimSpace(b.Props["controller.quorum.bootstrap.servers"]); bs != "" {
				why = "and sluice cannot find one through controller.quorum.bootstrap.servers=" + bs + " (KIP-853 bootstrap servers are not supported)"
			}
			return fmt.Errorf("process.roles=%s: a broker-only node follows a controller quorum, %s: list the quorum in controller.quorum.voters (--voters) as id@host:port,... on every node", v, why)
		}
	}
	if bs := strings.TrimSpace(b.Props["controller.quorum.bootstrap.servers"]); bs != "" && len(b.Voters) == 0 {
		for _, addr := range listElems(bs) {
			if !sameListener(addr, b.ControllerListen) {
				return fmt.Errorf("controller.quorum.bootstrap.servers=%s names a controller other than this node's own CONTROLLER listener (%q): sluice cannot form a quorum from KIP-853 bootstrap servers, and would start a single-node cluster of its own; list the quorum in controller.quorum.voters (--voters) as id@host:port,... on every node", bs, b.ControllerListen)
			}
		}
	}
	return nil
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
