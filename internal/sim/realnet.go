package sim

import (
	"context"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
)

// The real-broker world's simulated network between brokers.

// simTransport is a broker's Transport: its requests to a leader are
// served by the leader's own handlers (protocol.Local) on this goroutine,
// unless the broker is down, a link is cut (a cut back means the request
// was served and the answer lost) or the network drops them.
type simTransport struct {
	w    *realWorld
	from int32
}

func (t simTransport) Dial(addr, clientID string) sbroker.PeerClient {
	host, _, _ := net.SplitHostPort(addr)
	id := int32(0)
	if i := strings.LastIndexByte(host, '.'); i >= 0 {
		n, _ := strconv.Atoi(host[i+1:])
		id = int32(n)
	}
	return &simPeer{w: t.w, from: t.from, to: id, clientID: clientID}
}

type simPeer struct {
	w        *realWorld
	from, to int32
	clientID string
}

func (p *simPeer) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	w := p.w
	if p.to < 1 || int(p.to) > len(w.brokers) || !w.brokers[p.from-1].up {
		return nil, errUnreachable
	}
	to := w.brokers[p.to-1]
	if !to.up || w.cut[[2]int32{p.from, p.to}] || !w.settling && w.chance(realDropP) {
		return nil, errUnreachable
	}
	k := [2]int32{p.from, p.to}
	l := w.conns[k]
	if l == nil {
		l = protocol.NewLocal(to.reg)
		w.conns[k] = l
	}
	resp, err := l.Do(p.clientID, req)
	if err != nil {
		return nil, err
	}
	if w.cut[[2]int32{p.to, p.from}] || !w.settling && w.chance(realDropP) {
		return nil, errUnreachable
	}
	return resp, nil
}

// Traffic is not measured on the simulated network (no bytes cross it).
func (p *simPeer) Traffic() (sent, received int64) { return 0, 0 }
func (p *simPeer) Close() error                    { return nil }
