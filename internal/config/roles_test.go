package config

import (
	"strings"
	"testing"
)

func TestCheckRoles(t *testing.T) {
	voters := []Voter{{ID: 1, Addr: "127.0.0.1:9093"}, {ID: 2, Addr: "127.0.0.1:9193"}}
	for _, c := range []struct {
		name   string
		node   int32
		props  map[string]string
		ctrl   string
		voters []Voter
		want   string // "" accepts
	}{
		{name: "stock combined file", node: 1, ctrl: ":9093",
			props: map[string]string{"process.roles": "broker,controller", "controller.quorum.bootstrap.servers": "localhost:9093"}},
		{name: "combined, bootstrap on this node's address", node: 1, ctrl: "127.0.0.1:9093",
			props: map[string]string{"process.roles": "broker,controller", "controller.quorum.bootstrap.servers": "127.0.0.1:9093"}},
		// KIP-853: a node that names other controllers follows their
		// quorum (QuorumBootstrap).
		{name: "broker-only with bootstrap servers", node: 2, ctrl: "",
			props: map[string]string{"process.roles": "broker", "controller.quorum.bootstrap.servers": "127.0.0.1:9093"}},
		{name: "combined, bootstrap names another node", node: 2, ctrl: "127.0.0.1:9193",
			props: map[string]string{"process.roles": "broker,controller", "controller.quorum.bootstrap.servers": "127.0.0.1:9093"}},
		{name: "bootstrap another port", node: 1, ctrl: ":9093",
			props: map[string]string{"controller.quorum.bootstrap.servers": "localhost:9094"}},
		{name: "bootstrap without a CONTROLLER listener", node: 1,
			props: map[string]string{"controller.quorum.bootstrap.servers": "localhost:9093"}},
		{name: "broker-only naming its own controller listener", node: 2, ctrl: "127.0.0.1:9093",
			props: map[string]string{"process.roles": "broker", "controller.quorum.bootstrap.servers": "127.0.0.1:9093"}, want: "a broker-only node has no controller"},
		{name: "broker-only, no quorum", node: 2, props: map[string]string{"process.roles": "broker"}, want: "none is configured"},
		{name: "controller only", node: 1, props: map[string]string{"process.roles": "controller"}, want: "no controller-only nodes"},
		{name: "controller not a voter", node: 3, voters: voters, props: map[string]string{"process.roles": "broker,controller"}, want: "node.id 3 is not one of the voters"},
		{name: "broker-only but a voter", node: 2, voters: voters, props: map[string]string{"process.roles": "broker"}, want: "node.id 2 is one of the voters"},
		{name: "broker-only follows voters", node: 3, voters: voters, props: map[string]string{"process.roles": "broker"}},
		{name: "voters win over bootstrap", node: 2, voters: voters, ctrl: "127.0.0.1:9193",
			props: map[string]string{"process.roles": "broker,controller", "controller.quorum.bootstrap.servers": "127.0.0.1:9093"}},
		{name: "no roles, no quorum", node: 1, props: map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := Defaults()
			b.NodeID, b.ControllerListen, b.Voters = c.node, c.ctrl, c.voters
			for k, v := range c.props {
				b.Props[k] = v
			}
			err := b.CheckRoles()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestQuorumBootstrap: the bootstrap servers are followed unless they name
// only this node's own CONTROLLER listener; voters win over them.
func TestQuorumBootstrap(t *testing.T) {
	for _, c := range []struct {
		bs, ctrl string
		voters   []Voter
		n        int
		self     bool
	}{
		{bs: "localhost:9093", ctrl: ":9093", n: 1, self: true},
		{bs: "127.0.0.1:9093,10.9.9.9:9093", ctrl: "127.0.0.1:9093", n: 2},
		{bs: "127.0.0.1:9093", ctrl: "", n: 1},
		{bs: "127.0.0.1:9093", ctrl: "127.0.0.1:9093", voters: []Voter{{ID: 1, Addr: "127.0.0.1:9093"}}},
		{bs: "", ctrl: "127.0.0.1:9093"},
	} {
		b := Defaults()
		b.ControllerListen, b.Voters = c.ctrl, c.voters
		b.Props["controller.quorum.bootstrap.servers"] = c.bs
		addrs, self := b.QuorumBootstrap()
		if len(addrs) != c.n || self != c.self {
			t.Errorf("%+v: %v self %v, want %d self %v", c, addrs, self, c.n, c.self)
		}
	}
}
