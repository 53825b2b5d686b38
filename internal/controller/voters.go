package controller

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// Dynamic voters (KIP-853: AddRaftVoter, RemoveRaftVoter, DescribeQuorum)
// on hashicorp/raft's membership changes. --voters is the quorum a new
// cluster bootstraps with; afterwards raft's configuration, replicated in
// its log, is the quorum. A node that is not in --voters but has a
// controller listener runs raft unbootstrapped as a prospective voter and
// follows the metadata as a broker; AddRaftVoter adds it as a non-voter,
// waits until it has caught up, then makes it a voter, so that a slow new
// member never holds the quorum's commits. RemoveRaftVoter refuses a
// removal after which the remaining voters that answer could not form a
// majority. A node outside the configuration (not yet added, or removed)
// fetches images from the active controller (followLoop); the FSM skips
// entries already in a fetched image, so both sources move one image
// forward. Directory ids (KIP-853's voter keys) do not exist here: a
// request's VoterDirectoryId is ignored, and voteguard.go handles a voter
// that lost its disk.

const (
	opAddVoter       = "AddRaftVoter"
	opRemoveVoter    = "RemoveRaftVoter"
	opDescribeQuorum = "DescribeQuorum"

	// catchUpTimeout is how long AddRaftVoter waits for a new voter to
	// catch up when the request gives no timeout.
	catchUpTimeout = 30 * time.Second
	// maxVoters bounds the quorum.
	maxVoters = 9
)

var _ metadata.QuorumController = (*Node)(nil)

func init() {
	handlers[opAddVoter] = (*active).addVoter
	handlers[opRemoveVoter] = (*active).removeVoter
	handlers[opDescribeQuorum] = (*active).describeQuorum
}

type addVoterReq struct {
	ID        int32  `json:"id"`
	Addr      string `json:"addr"`
	TimeoutMs int32  `json:"timeoutMs"`
}

type removeVoterReq struct {
	ID int32 `json:"id"`
}

// AddVoter adds node id, whose controller listener is addr, to the quorum
// (AddRaftVoter).
func (n *Node) AddVoter(ctx context.Context, id int32, addr string, timeout time.Duration) error {
	_, err := n.cli.call(ctx, opAddVoter, addVoterReq{ID: id, Addr: addr, TimeoutMs: int32(timeout / time.Millisecond)}, nil, timeout)
	return err
}

// RemoveVoter removes node id from the quorum (RemoveRaftVoter).
func (n *Node) RemoveVoter(ctx context.Context, id int32) error {
	_, err := n.cli.call(ctx, opRemoveVoter, removeVoterReq{ID: id}, nil, 0)
	return err
}

// DescribeQuorum asks the active controller for the quorum's state.
func (n *Node) DescribeQuorum(ctx context.Context) (metadata.QuorumInfo, error) {
	var q metadata.QuorumInfo
	_, err := n.cli.call(ctx, opDescribeQuorum, struct{}{}, &q, 0)
	return q, err
}

// inQuorum reports whether this node is in raft's configuration and knows
// a leader: its FSM then gets the metadata; otherwise followLoop fetches.
func (n *Node) inQuorum() bool {
	if addr, _ := n.raft.LeaderWithID(); addr == "" {
		return false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	self := raft.ServerID(strconv.Itoa(int(n.cfg.NodeID)))
	for _, s := range f.Configuration().Servers {
		if s.ID == self {
			return true
		}
	}
	return false
}

// followLoop fetches images while the node is outside the quorum.
func (n *Node) followLoop() {
	defer n.wg.Done()
	n.fetchImages(func() bool { return !n.inQuorum() })
}

// servers returns raft's latest configuration.
func (a *active) servers() ([]raft.Server, error) {
	f := a.n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func memberID(s raft.Server) int32 {
	v, _ := strconv.Atoi(string(s.ID))
	return int32(v)
}

// addVoter is AddRaftVoter on the active controller.
func (a *active) addVoter(ctx context.Context, body []byte) (any, int64, error) {
	var in addVoterReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	if lvl := a.n.st.Image().FeatureLevel(metadata.FeatureKRaftVersion); lvl < 1 {
		return nil, 0, fmt.Errorf("%w: kraft.version is %d (a static quorum, as upgraded from a binary without voter changes): finalize kraft.version 1 first (sluice feature upgrade --feature kraft.version=1)", kerr.UnsupportedVersion, lvl)
	}
	if in.ID < 0 || in.Addr == "" {
		return nil, 0, fmt.Errorf("%w: a voter needs an id and a controller listener address", kerr.InvalidRequest)
	}
	timeout := time.Duration(in.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = catchUpTimeout
	}
	ss, err := a.servers()
	if err != nil {
		return nil, 0, err
	}
	voters := 0
	for _, s := range ss {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if memberID(s) == in.ID && s.Suffrage == raft.Voter {
			return nil, 0, fmt.Errorf("%w: node %d is already a voter", kerr.DuplicateVoter, in.ID)
		}
		if string(s.Address) == in.Addr && memberID(s) != in.ID {
			return nil, 0, fmt.Errorf("%w: %s is the address of voter %s", kerr.InvalidRequest, in.Addr, s.ID)
		}
	}
	if voters >= maxVoters {
		return nil, 0, fmt.Errorf("%w: the quorum has %d voters, at most %d", kerr.InvalidRequest, voters, maxVoters)
	}
	r := a.n.raft
	if err := r.AddNonvoter(serverID(in.ID), raft.ServerAddress(in.Addr), 0, timeout).Error(); err != nil {
		return nil, 0, raftErr(err)
	}
	// Caught up: its log reaches what was committed when it was added.
	target := r.CommitIndex()
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		p, perr := a.n.probe(pctx, in.Addr)
		cancel()
		if perr == nil && p.LastIndex >= target {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			// Leave the configuration as it was before answering.
			if err := r.RemoveServer(serverID(in.ID), 0, 10*time.Second).Error(); err != nil {
				a.n.log.Warn("removing the non-voter that did not catch up", "voter", in.ID, "err", err)
			}
			why := "no answer"
			if perr == nil {
				why = fmt.Sprintf("its log is at %d of %d", p.LastIndex, target)
			}
			return nil, 0, fmt.Errorf("%w: node %d at %s did not catch up within %v (%s); is it running with this controller listener?", kerr.RequestTimedOut, in.ID, in.Addr, timeout, why)
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			continue
		}
	}
	if err := r.AddVoter(serverID(in.ID), raft.ServerAddress(in.Addr), 0, timeout).Error(); err != nil {
		return nil, 0, raftErr(err)
	}
	a.n.log.Info("voter added", "voter", in.ID, "addr", in.Addr)
	return struct{}{}, 0, nil
}

// removeVoter is RemoveRaftVoter on the active controller.
func (a *active) removeVoter(ctx context.Context, body []byte) (any, int64, error) {
	var in removeVoterReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	if lvl := a.n.st.Image().FeatureLevel(metadata.FeatureKRaftVersion); lvl < 1 {
		return nil, 0, fmt.Errorf("%w: kraft.version is %d (a static quorum, as upgraded from a binary without voter changes): finalize kraft.version 1 first (sluice feature upgrade --feature kraft.version=1)", kerr.UnsupportedVersion, lvl)
	}
	ss, err := a.servers()
	if err != nil {
		return nil, 0, err
	}
	var rest []raft.Server
	found := false
	for _, s := range ss {
		if memberID(s) == in.ID {
			found = found || s.Suffrage == raft.Voter
			continue
		}
		if s.Suffrage == raft.Voter {
			rest = append(rest, s)
		}
	}
	if !found {
		return nil, 0, fmt.Errorf("%w: node %d is not a voter", kerr.VoterNotFound, in.ID)
	}
	if in.ID == a.n.cfg.NodeID && len(rest) > 0 {
		// The active controller leaves: it hands leadership over and
		// the caller retries on the new one, which removes it.
		a.n.raft.LeadershipTransfer()
		return nil, 0, fmt.Errorf("%w: voter %d is the active controller; leadership is moving before its removal", kerr.NotController, in.ID)
	}
	if len(rest) == 0 {
		return nil, 0, fmt.Errorf("%w: node %d is the last voter", kerr.InvalidRequest, in.ID)
	}
	// The remaining voters that answer and are caught up must be a
	// majority of the new quorum, or it could commit nothing.
	target := a.n.raft.CommitIndex()
	alive := a.caughtUp(ctx, rest, target)
	if alive <= len(rest)/2 {
		return nil, 0, fmt.Errorf("%w: removing voter %d leaves %d voters of which only %d are reachable and caught up: the quorum would be lost", kerr.InvalidRequest, in.ID, len(rest), alive)
	}
	if err := a.n.raft.RemoveServer(serverID(in.ID), 0, 30*time.Second).Error(); err != nil {
		return nil, 0, raftErr(err)
	}
	a.n.log.Info("voter removed", "voter", in.ID)
	return struct{}{}, 0, nil
}

// caughtUp counts the servers whose log reaches target (this node counts
// without asking).
func (a *active) caughtUp(ctx context.Context, ss []raft.Server, target uint64) int {
	self := serverID(a.n.cfg.NodeID)
	var mu sync.Mutex
	var wg sync.WaitGroup
	n := 0
	for _, s := range ss {
		if s.ID == self {
			n++
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if p, err := a.n.probe(pctx, string(s.Address)); err == nil && p.LastIndex >= target && !p.Guarded {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return n
}

// describeQuorum is DescribeQuorum on the active controller.
func (a *active) describeQuorum(ctx context.Context, _ []byte) (any, int64, error) {
	ss, err := a.servers()
	if err != nil {
		return nil, 0, err
	}
	r := a.n.raft
	term, _ := strconv.ParseInt(r.Stats()["term"], 10, 64)
	q := metadata.QuorumInfo{LeaderID: a.n.cfg.NodeID, LeaderEpoch: int32(term), HighWatermark: int64(r.CommitIndex())}
	members := make([]metadata.QuorumMember, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		members[i] = metadata.QuorumMember{ID: memberID(s), Addr: string(s.Address), LogEndOffset: -1}
		if s.ID == serverID(a.n.cfg.NodeID) {
			members[i].LogEndOffset = int64(r.LastIndex())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if p, err := a.n.probe(pctx, string(s.Address)); err == nil {
				members[i].LogEndOffset = int64(p.LastIndex)
			}
		}()
	}
	wg.Wait()
	inQuorum := map[int32]bool{}
	for i, s := range ss {
		inQuorum[members[i].ID] = true
		if s.Suffrage == raft.Voter {
			q.Voters = append(q.Voters, members[i])
		} else {
			q.Observers = append(q.Observers, members[i])
		}
	}
	for id := range a.n.st.Image().Brokers {
		if !inQuorum[id] {
			q.Observers = append(q.Observers, metadata.QuorumMember{ID: id, LogEndOffset: -1})
		}
	}
	return q, 0, nil
}
