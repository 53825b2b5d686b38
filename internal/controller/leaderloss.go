package controller

import (
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// A dead active controller is told apart from a paused one the same way
// as a dead broker (liveness.go): the raft connections it opened to this
// voter end, and its controller port refuses a new connection. raft
// itself waits for its heartbeat timeout, a random time in [RaftTimeout,
// 2·RaftTimeout), before a follower campaigns. On that evidence the
// followers campaign RaftTimeout/2 (the least raft accepts: its
// LeaderLeaseTimeout) after the leader's last contact, one hurryStep
// apart (hurryElection). A paused leader keeps its connections and its
// listener: the timeouts stay as configured.

// leaderProbes is how many times, 50 ms apart, a follower dials the
// leader's controller port after one of the leader's connections ended.
const leaderProbes = 10

// raftConnEnded is called when a raft connection another voter opened to
// this one ends (rpc.go's mux): if this voter follows a leader, it probes
// the leader's controller port.
func (n *Node) raftConnEnded() {
	select {
	case <-n.raftReady:
	default:
		return
	}
	select {
	case <-n.closing:
		return
	default:
	}
	if n.raft.State() != raft.Follower {
		return
	}
	addr, id := n.raft.LeaderWithID()
	if addr == "" || !n.leaderProbe.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.leaderProbe.Store(false)
		// A dying process's kernel may close its connections a moment
		// before its listening socket: probe a few times.
		for try := 0; ; try++ {
			if cur, _ := n.raft.LeaderWithID(); cur != addr || n.raft.State() != raft.Follower {
				return
			}
			if refused(dialProbe(n.baseCtx, string(addr))) {
				break
			}
			if try == leaderProbes-1 || !sleepCtx(n.baseCtx, 50*time.Millisecond) {
				return
			}
		}
		n.hurryElection(addr, id)
	}()
}

// hurryStep separates the surviving voters' campaigns (hurryElection).
const hurryStep = 100 * time.Millisecond

// hurryElection campaigns as soon as raft allows: raft's heartbeat and
// election timeouts go down to LeaderLeaseTimeout (RaftTimeout/2), and once
// the dead leader's last contact is that old plus hurryStep per surviving
// voter ranked before this one (by id), they are lowered once more, which
// makes raft check at once and campaign. The stagger lets the first
// candidate collect the others' votes instead of splitting them (with
// pre-vote, a voter refuses a candidate while it still has a leader). The
// configured timeouts come back once a leader other than the dead one is
// known, or after ten raft timeouts.
func (n *Node) hurryElection(dead raft.ServerAddress, id raft.ServerID) {
	short := n.cfg.RaftTimeout / 2
	leaderGone := func() bool {
		cur, _ := n.raft.LeaderWithID()
		return cur == "" || cur == dead
	}
	if !n.setRaftTimeouts(short + hurryStep) {
		return
	}
	defer n.setRaftTimeouts(n.cfg.RaftTimeout)
	n.hurried.Add(1)
	rank := n.survivorRank(id)
	n.log.Info("active controller's connections ended and its controller port refuses connections: hurrying the election",
		"leader", id, "addr", dead, "timeout", short, "rank", rank)
	campaignAt := short + time.Duration(rank)*hurryStep
	deadline := time.Now().Add(10 * n.cfg.RaftTimeout)
	campaigned := false
	for time.Now().Before(deadline) && leaderGone() {
		if !campaigned && time.Since(n.raft.LastContact()) >= campaignAt {
			campaigned = true
			if !n.setRaftTimeouts(short) {
				return
			}
		}
		if !sleepCtx(n.baseCtx, 10*time.Millisecond) {
			return
		}
	}
}

// setRaftTimeouts sets raft's heartbeat and election timeouts (raft
// re-checks its heartbeat at once when they go down).
func (n *Node) setRaftTimeouts(d time.Duration) bool {
	select {
	case <-n.closing:
		return false
	default:
	}
	rc := n.raft.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = d, d
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("setting raft timeouts", "timeout", d, "err", err)
		return false
	}
	return true
}

// survivorRank is this voter's place, by id, among the voters other than
// dead.
func (n *Node) survivorRank(dead raft.ServerID) int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	self := strconv.Itoa(int(n.cfg.NodeID))
	var ids []int
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter || s.ID == dead {
			continue
		}
		if id, err := strconv.Atoi(string(s.ID)); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for i, id := range ids {
		if strconv.Itoa(id) == self {
			return i
		}
	}
	return 0
}
