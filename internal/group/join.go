package group

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newMemberID is Kafka's form: prefix (client id, or the instance id of a
// static member) + "-" + a random UUID.
func newMemberID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func requestProtocols(req *kmsg.JoinGroupRequest) []protocol {
	ps := make([]protocol, len(req.Protocols))
	for i, p := range req.Protocols {
		ps[i] = protocol{name: p.Name, metadata: p.Metadata}
	}
	return ps
}

// acceptJoining applies group.max.size (Kafka's acceptJoiningMember).
func (g *Group) acceptJoining(memberID string) bool {
	m := g.members[memberID]
	switch g.state {
	case PreparingRebalance:
		return m != nil && m.joinWait != nil || g.awaiting+len(g.pending) < g.cfg.MaxGroupSize
	case CompletingRebalance, Stable:
		return m != nil || len(g.members)+len(g.pending) < g.cfg.MaxGroupSize
	}
	return len(g.pending) < g.cfg.MaxGroupSize
}

// fencedStatic reports a static member presenting a member id other than
// the one its instance id holds (KIP-345: FENCED_INSTANCE_ID).
func (g *Group) fencedStatic(memberID string, instanceID *string) bool {
	if instanceID == nil {
		return false
	}
	cur, ok := g.static[*instanceID]
	return ok && cur != memberID
}

// Join handles JoinGroup. The coordinator has validated the group id,
// timeouts and protocols. Exactly one result is non-nil: an immediate
// response, or a channel that receives the response when the join phase
// completes.
func (g *Group) Join(now time.Time, req *kmsg.JoinGroupRequest, clientID, clientHost string) (*kmsg.JoinGroupResponse, <-chan *kmsg.JoinGroupResponse) {
	ps := requestProtocols(req)
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	if g.state == Dead {
		return joinError(kerr.CoordinatorNotAvailable.Code, req.MemberID), nil
	}
	if !g.acceptJoining(req.MemberID) {
		return joinError(kerr.GroupMaxSizeReached.Code, req.MemberID), nil
	}
	if req.MemberID == "" {
		if !g.supportsProtocols(req.ProtocolType, ps, "") {
			return joinError(kerr.InconsistentGroupProtocol.Code, ""), nil
		}
		if req.InstanceID != nil {
			id := newMemberID(*req.InstanceID)
			if old, ok := g.static[*req.InstanceID]; ok {
				return g.replaceStatic(now, g.members[old], id, req, ps, clientID, clientHost, session, rebalance)
			}
			return nil, g.addMember(now, id, req, ps, clientID, clientHost, session, rebalance)
		}
		id := newMemberID(clientID)
		if req.Version >= 4 {
			// KIP-394: hand out the id; the member joins again with it.
			g.pending[id] = now.Add(session)
			return joinError(kerr.MemberIDRequired.Code, id), nil
		}
		return nil, g.addMember(now, id, req, ps, clientID, clientHost, session, rebalance)
	}
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		return nil, g.addMember(now, req.MemberID, req, ps, clientID, clientHost, session, rebalance)
	}
	if g.fencedStatic(req.MemberID, req.InstanceID) {
		return joinError(kerr.FencedInstanceID.Code, req.MemberID), nil
	}
	m := g.members[req.MemberID]
	if m == nil {
		return joinError(kerr.UnknownMemberID.Code, req.MemberID), nil
	}
	if !g.supportsProtocols(req.ProtocolType, ps, m.id) {
		return joinError(kerr.InconsistentGroupProtocol.Code, req.MemberID), nil
	}
	switch g.state {
	case PreparingRebalance:
		return nil, g.updateMember(now, m, ps, clientID, clientHost, session, rebalance)
	case CompletingRebalance:
		if m.sameProtocols(ps) {
			// A retry of a join that completed: answer with the result.
			m.expireAt = now.Add(m.sessionTimeout)
			return g.joinResponse(m, g.leader), nil
		}
		return nil, g.updateMember(now, m, ps, clientID, clientHost, session, rebalance)
	case Stable:
		if m.id == g.leader || !m.sameProtocols(ps) {
			return nil, g.updateMember(now, m, ps, clientID, clientHost, session, rebalance)
		}
		m.expireAt = now.Add(m.sessionTimeout)
		return g.joinResponse(m, g.leader), nil
	}
	return joinError(kerr.UnknownMemberID.Code, req.MemberID), nil
}

// addMember adds a member that waits for the join phase to complete.
func (g *Group) addMember(now time.Time, id string, req *kmsg.JoinGroupRequest, ps []protocol, clientID, clientHost string, session, rebalance time.Duration) <-chan *kmsg.JoinGroupResponse {
	g.seq++
	m := &member{id: id, instanceID: req.InstanceID, clientID: clientID, clientHost: clientHost,
		sessionTimeout: session, rebalanceTimeout: rebalance, protocolType: req.ProtocolType,
		protocols: ps, seq: g.seq, isNew: true, expireAt: now.Add(session),
		joinWait: make(chan *kmsg.JoinGroupResponse, 1)}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	if g.leader == "" {
		g.leader = id
	}
	g.members[id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = id
	}
	g.awaiting++
	if g.state == PreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	wait := m.joinWait // the join may complete right here
	if g.state == PreparingRebalance {
		g.tryCompleteJoin(now)
	} else {
		g.maybePrepareRebalance(now)
	}
	return wait
}

// updateMember records a known member's (re)join and makes it wait for the
// join phase, starting one if needed.
func (g *Group) updateMember(now time.Time, m *member, ps []protocol, clientID, clientHost string, session, rebalance time.Duration) <-chan *kmsg.JoinGroupResponse {
	m.protocols = ps
	m.clientID, m.clientHost = clientID, clientHost
	m.sessionTimeout, m.rebalanceTimeout = session, rebalance
	if m.joinWait != nil {
		// A retried join replaces the one still waiting.
		m.joinWait <- joinError(kerr.RebalanceInProgress.Code, m.id)
	} else {
		g.awaiting++
	}
	wait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWait = wait
	if g.state == PreparingRebalance {
		g.tryCompleteJoin(now)
	} else {
		g.maybePrepareRebalance(now)
	}
	return wait
}

// replaceStatic handles a static member rejoining with an unknown member id
// (a restart): the new member id takes over the old one, which is fenced.
// In a stable group whose protocol would not change, no rebalance happens:
// the group is stored and the member gets the current generation (with the
// old leader id, so it does not act as leader and reassign).
func (g *Group) replaceStatic(now time.Time, old *member, newID string, req *kmsg.JoinGroupRequest, ps []protocol, clientID, clientHost string, session, rebalance time.Duration) (*kmsg.JoinGroupResponse, <-chan *kmsg.JoinGroupResponse) {
	oldLeader := g.leader
	wasAwaiting := old.joinWait != nil
	if old.joinWait != nil {
		old.joinWait <- joinError(kerr.FencedInstanceID.Code, old.id)
		old.joinWait = nil
	}
	if old.syncWait != nil {
		old.syncWait <- syncError(kerr.FencedInstanceID.Code)
		old.syncWait = nil
	}
	oldProtocols := old.protocols
	delete(g.members, old.id)
	m := old
	m.id = newID
	m.protocols = ps
	m.clientID, m.clientHost = clientID, clientHost
	m.sessionTimeout, m.rebalanceTimeout = session, rebalance
	m.expireAt = now.Add(session)
	g.members[newID] = m
	g.static[*req.InstanceID] = newID
	if g.leader == old.id {
		g.leader = newID
	}
	joinWait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWait = joinWait
	if !wasAwaiting {
		g.awaiting++
	}
	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol && string(m.metadataFor(g.protocol)) == string(protocolMeta(oldProtocols, g.protocol)) {
			// No rebalance: persist the new member id, then answer.
			m.joinWait = nil
			g.awaiting--
			wait := make(chan *kmsg.JoinGroupResponse, 1)
			gen := g.generation
			g.store(nil, func(_ time.Time, err error) {
				if err != nil {
					wait <- joinError(kerr.CoordinatorNotAvailable.Code, newID)
					return
				}
				if g.members[newID] != m || g.generation != gen {
					wait <- joinError(kerr.RebalanceInProgress.Code, newID)
					return
				}
				wait <- g.joinResponse(m, oldLeader)
			})
			return nil, wait
		}
		g.prepareRebalance(now)
	case CompletingRebalance:
		// The leader may be assigning to the old id: start over.
		g.prepareRebalance(now)
	case PreparingRebalance:
		g.tryCompleteJoin(now)
	}
	return nil, joinWait
}

func protocolMeta(ps []protocol, name string) []byte {
	for _, p := range ps {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// Sync handles SyncGroup: the leader's assignment is stored, then every
// member gets its part; other members wait for it. Assignments sent by a
// non-leader are ignored, as in Kafka.
func (g *Group) Sync(now time.Time, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, <-chan *kmsg.SyncGroupResponse) {
	if g.state == Dead {
		return syncError(kerr.CoordinatorNotAvailable.Code), nil
	}
	if g.fencedStatic(req.MemberID, req.InstanceID) {
		return syncError(kerr.FencedInstanceID.Code), nil
	}
	m := g.members[req.MemberID]
	if m == nil {
		return syncError(kerr.UnknownMemberID.Code), nil
	}
	if req.Generation != g.generation {
		return syncError(kerr.IllegalGeneration.Code), nil
	}
	if req.ProtocolType != nil && *req.ProtocolType != g.protocolType || req.Protocol != nil && *req.Protocol != g.protocol {
		return syncError(kerr.InconsistentGroupProtocol.Code), nil
	}
	switch g.state {
	case PreparingRebalance:
		return syncError(kerr.RebalanceInProgress.Code), nil
	case Stable:
		m.expireAt = now.Add(m.sessionTimeout)
		return g.syncResponse(m.assignment), nil
	case CompletingRebalance:
	default:
		return syncError(kerr.UnknownMemberID.Code), nil
	}
	if m.syncWait != nil {
		m.syncWait <- syncError(kerr.RebalanceInProgress.Code)
	}
	syncWait := make(chan *kmsg.SyncGroupResponse, 1)
	m.syncWait = syncWait
	m.expireAt = now.Add(m.sessionTimeout)
	if m.id == g.leader {
		assignment := make(map[string][]byte, len(g.members))
		for _, a := range req.GroupAssignment {
			if g.members[a.MemberID] != nil {
				assignment[a.MemberID] = a.MemberAssignment
			}
		}
		for id := range g.members {
			if assignment[id] == nil {
				assignment[id] = []byte{}
			}
		}
		gen := g.generation
		g.store(assignment, func(now time.Time, err error) {
			if g.state != CompletingRebalance || g.generation != gen {
				return
			}
			if err != nil {
				for _, o := range g.members {
					if o.syncWait != nil {
						o.syncWait <- syncError(kerr.CoordinatorNotAvailable.Code)
						o.syncWait = nil
					}
				}
				g.prepareRebalance(now)
				return
			}
			g.transition(Stable, now)
			for id, o := range g.members {
				o.assignment = assignment[id]
				if o.syncWait != nil {
					o.syncWait <- g.syncResponse(o.assignment)
					o.syncWait = nil
				}
			}
		})
	}
	return nil, syncWait
}

func (g *Group) syncResponse(assignment []byte) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.MemberAssignment = assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// Heartbeat handles Heartbeat and returns its error code.
func (g *Group) Heartbeat(now time.Time, req *kmsg.HeartbeatRequest) int16 {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if g.fencedStatic(req.MemberID, req.InstanceID) {
		return kerr.FencedInstanceID.Code
	}
	m := g.members[req.MemberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	switch g.state {
	case Empty:
		return kerr.UnknownMemberID.Code
	case PreparingRebalance:
		m.expireAt = now.Add(m.sessionTimeout)
		return kerr.RebalanceInProgress.Code
	}
	m.expireAt = now.Add(m.sessionTimeout)
	return 0
}

// Leave removes a member (LeaveGroup). instanceID, if set, names a static
// member; memberID may then be empty.
func (g *Group) Leave(now time.Time, memberID string, instanceID *string) int16 {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if memberID != "" && cur != memberID {
			return kerr.FencedInstanceID.Code
		}
		memberID = cur
	}
	if _, ok := g.pending[memberID]; ok {
		delete(g.pending, memberID)
		g.tryCompleteJoin(now)
		return 0
	}
	m := g.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	g.removeMember(now, m, kerr.UnknownMemberID.Code)
	return 0
}
