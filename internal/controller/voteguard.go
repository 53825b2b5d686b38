package controller

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluice-io/sluice/internal/vfs"
)

// A voter that lost its metadata log (a replaced disk, a wiped data
// directory) must not vote until it has caught up again. An empty log
// grants a vote to any candidate, so with one other voter down it could
// elect a controller that lacks entries a majority had committed, and that
// controller would then overwrite them everywhere (Raft's disk-loss
// hazard; Kafka's KIP-853 closes it with a directory id per voter, which
// a wiped replica no longer has). hashicorp/raft has no such identity, so
// sluice guards the transport instead:
//
//   - A voter that starts without raft state (or with the rejoin marker
//     left by an earlier start that had not finished) writes the marker
//     and starts guarded: it refuses every vote and pre-vote request and
//     does not ask for votes itself, while still accepting the leader's
//     entries.
//   - The guard lifts when the node has caught up with a leader (its log
//     and applied index reach the leader's commit index, asked over the
//     controller RPC), or when a majority of the voters, itself included,
//     hold nothing beyond the bootstrap configuration (index 1): a new
//     cluster, whose voters all start empty, forms as before.
//
// Lifting removes the marker. Two voters of three losing their disks at
// once is a lost majority: they would form a new cluster, as in Raft and
// KRaft, where that needs an operator.

// rejoinMarker is the file in the raft directory that marks a guarded
// start.
const rejoinMarker = "rejoining"

// opProbe asks a voter for its raft position (probeResp); any voter
// answers, active or not.
const opProbe = "QuorumProbe"

// probeResp is a voter's answer to opProbe.
type probeResp struct {
	LastIndex   uint64 `json:"lastIndex"`
	CommitIndex uint64 `json:"commitIndex"`
	Guarded     bool   `json:"guarded"`
}

// rejoinInterval is how often a guarded voter checks whether it may vote
// again.
const rejoinInterval = 250 * time.Millisecond

// guardedTransport wraps the raft transport of a voter: while guarded it
// answers vote and pre-vote requests with a refusal and sends none.
type guardedTransport struct {
	raft.Transport
	guarded atomic.Bool
	rpcs    chan raft.RPC
	header  raft.RPCHeader
	done    chan struct{}
}

// errGuarded fails the vote requests of a guarded voter.
var errGuarded = errors.New("controller: voter is catching up after losing its metadata log; not voting")

func newGuardedTransport(inner raft.Transport, id raft.ServerID, guarded bool) *guardedTransport {
	g := &guardedTransport{
		Transport: inner,
		rpcs:      make(chan raft.RPC),
		header:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(inner.LocalAddr())},
		done:      make(chan struct{}),
	}
	g.guarded.Store(guarded)
	go g.forward()
	return g
}

// forward passes the inner transport's requests on, refusing votes while
// guarded.
func (g *guardedTransport) forward() {
	in := g.Transport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case rpc = <-in:
		case <-g.done:
			return
		}
		if g.guarded.Load() {
			switch req := rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{RPCHeader: g.header, Term: req.Term}, nil)
				continue
			case *raft.RequestPreVoteRequest:
				rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: g.header, Term: req.Term}, nil)
				continue
			}
		}
		select {
		case g.rpcs <- rpc:
		case <-g.done:
			return
		}
	}
}

// Consumer implements raft.Transport.
func (g *guardedTransport) Consumer() <-chan raft.RPC { return g.rpcs }

// RequestVote implements raft.Transport: a guarded voter asks nobody.
func (g *guardedTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if g.guarded.Load() {
		return errGuarded
	}
	return g.Transport.RequestVote(id, target, args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (g *guardedTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	pv, ok := g.Transport.(raft.WithPreVote)
	if !ok || g.guarded.Load() {
		return errGuarded
	}
	return pv.RequestPreVote(id, target, args, resp)
}

// Close implements raft.WithClose.
func (g *guardedTransport) Close() error {
	select {
	case <-g.done:
	default:
		close(g.done)
	}
	if c, ok := g.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// probeState is this voter's answer to opProbe.
func (n *Node) probeState() probeResp {
	return probeResp{LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(), Guarded: n.guard.guarded.Load()}
}

// writeRejoinMarker creates the marker durably (file and directory
// synced).
func writeRejoinMarker(dir string) error {
	return vfs.WriteFileAtomic(vfs.Default, filepath.Join(dir, rejoinMarker), nil, true)
}

// rejoin runs while the node is guarded and lifts the guard once voting
// is safe again (see the top of this file).
func (n *Node) rejoin(dir string) {
	defer n.wg.Done()
	t := time.NewTicker(rejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
		}
		why, ok := n.mayVote()
		if !ok {
			continue
		}
		n.guard.guarded.Store(false)
		if err := os.Remove(filepath.Join(dir, rejoinMarker)); err != nil && !os.IsNotExist(err) {
			n.log.Warn("removing the rejoin marker", "err", err)
		} else if err := vfs.Default.SyncDir(dir); err != nil {
			n.log.Warn("syncing the raft directory", "err", err)
		}
		n.log.Info("controller voter votes again", "reason", why, "last.index", n.raft.LastIndex())
		return
	}
}

// mayVote reports whether the guarded node may vote again, and why.
func (n *Node) mayVote() (string, bool) {
	ctx, cancel := context.WithTimeout(n.baseCtx, 2*time.Second)
	defer cancel()
	if addr, _ := n.raft.LeaderWithID(); addr != "" {
		p, err := n.probe(ctx, string(addr))
		if err == nil && !p.Guarded && p.CommitIndex > 0 &&
			n.raft.LastIndex() >= p.CommitIndex && n.raft.AppliedIndex() >= p.CommitIndex {
			return "caught up with the leader", true
		}
		return "", false
	}
	if n.raft.LastIndex() > 1 {
		return "", false
	}
	empty := 1 // this node
	for _, v := range n.cfg.Voters {
		if v.ID == n.cfg.NodeID {
			continue
		}
		p, err := n.probe(ctx, v.Addr)
		if err != nil {
			continue
		}
		if p.LastIndex > 1 {
			return "", false
		}
		empty++
	}
	if empty > len(n.cfg.Voters)/2 {
		return "a majority of the voters hold only the bootstrap configuration (a new cluster)", true
	}
	return "", false
}

// probe asks the voter at addr for its raft position.
func (n *Node) probe(ctx context.Context, addr string) (probeResp, error) {
	var p probeResp
	resp, err := n.cli.roundTrip(ctx, addr, rpcRequest{Op: opProbe}, 2*time.Second)
	if err != nil {
		return p, err
	}
	if resp.Code != 0 {
		return p, codeErr(resp.Code, resp.Msg)
	}
	return p, json.Unmarshal(resp.Body, &p)
}
