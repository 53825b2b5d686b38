package sim

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/replica"
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

func (p *simPeer) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	w := p.w
	if p.to < 1 || int(p.to) > len(w.brokers) || !w.brokers[p.from-1].up {
		return nil, errUnreachable
	}
	to := w.brokers[p.to-1]
	if !to.up || w.cut[[2]int32{p.from, p.to}] || !w.settling && w.chance(realDropP) {
		return nil, errUnreachable
	}
	if pr, ok := req.(*kmsg.ProduceRequest); ok && p.clientID == remoteMetaClient {
		return p.metaProduce(ctx, to, pr)
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

// remoteMetaClient is the client id of the remote log manager's
// __remote_log_metadata writes (rlmstore.go).
const remoteMetaClient = "sluice-remote-log-metadata"

// metaProduce delivers a remote log manager's acks=all write to
// __remote_log_metadata (realtier.go) to the leader's Partition.Produce,
// as simMarkers delivers markers: its answer needs the followers' fetch
// steps, so the pass that sent it parks (sbroker.StepWait) until the
// partition answers, the leader goes down, or realProduceDeadline passes
// (a lost answer: the record may still commit). The answer may be lost
// on the way back like any other.
func (p *simPeer) metaProduce(ctx context.Context, to *realBroker, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	w := p.w
	if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
		return nil, errors.New("sim: a metadata write of more than one partition")
	}
	rt, rp := req.Topics[0], req.Topics[0].Partitions[0]
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(req.GetVersion())
	st := kmsg.NewProduceResponseTopic()
	st.Topic = rt.Topic
	sp := kmsg.NewProduceResponseTopicPartition()
	sp.Partition = rp.Partition
	part, err := to.b.LeaderBy(rt.Topic, rp.Partition, time.Time{})
	if err != nil {
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
	} else {
		h, err := batch.ParseHeader(rp.Records)
		if err != nil {
			return nil, err
		}
		ch := part.Produce(rp.Records, h, req.Acks, w.clk.Now().Add(time.Duration(req.TimeoutMillis)*time.Millisecond))
		proc, deadline := to.b, w.clk.Now().Add(realProduceDeadline)
		var res replica.ProduceResult
		lost := false
		if !sbroker.StepWait(ctx, func() bool {
			if !to.up || to.b != proc || !w.clk.Now().Before(deadline) {
				lost = true
				return true
			}
			select {
			case res = <-ch:
				return true
			default:
				return false
			}
		}) || lost {
			return nil, errUnreachable
		}
		sp.ErrorCode, sp.BaseOffset = res.Error, res.BaseOffset
	}
	if !w.brokers[p.from-1].up || w.cut[[2]int32{p.to, p.from}] || !w.settling && w.chance(realDropP) {
		return nil, errUnreachable
	}
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	return resp, nil
}
