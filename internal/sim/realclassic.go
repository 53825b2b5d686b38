package sim

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/txn"
)

// A classic consumer group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
// through the brokers' real stepped group coordinators, in the seeds that
// run the share group (RealOptions.Share). Three members at a time join
// (MEMBER_ID_REQUIRED first, as KIP-394 clients), the leader the
// coordinator names assigns realClassicParts partitions round-robin over
// the generation's members in its SyncGroup, and every member
// heartbeats, rejoining on REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or
// UNKNOWN_MEMBER_ID. A member sometimes leaves (LeaveGroup) or crashes
// (stops; its session expires on the coordinator's timer), and a new one
// joins. The assignment is opaque to the coordinator: it hands each
// member what the leader sent for it.
//
// Invariant: no two members of one generation own the same partition:
// every SyncGroup answer's assignment, by generation, is checked against
// the others' of that generation (of one incarnation of the group: after
// an empty group is deleted, generations start again at 1). (A SyncGroup is answered once the
// generation's group record is committed, so a coordinator elected later
// never starts that generation again.)

const (
	realClassicGroup = "sim-classic"
	realClassicParts = 6
	realClassicSize  = 3
)

type classicMember struct {
	name       string
	id         string
	gen        int32
	leader     bool
	leaderID   string   // the generation's leader, which names its incarnation of the group
	members    []string // the generation's members, for the leader
	req        *coordReq
	node       int32
	timeout    time.Time // when the request in flight is given up
	synced     bool      // holds the assignment of gen
	hbAt       time.Time
	stallUntil time.Time
}

type simClassic struct {
	members []*classicMember
	next    int
	// owner is each generation's owner of each partition.
	owner map[classicGen]map[int32]string
	names map[string]string // member id → name
	syncs int
}

func newSimClassic() *simClassic {
	return &simClassic{owner: map[classicGen]map[int32]string{}, names: map[string]string{}}
}

// classicStep moves the classic group's members one step.
func (w *realWorld) classicStep(nemesis bool) {
	if !w.shr.on {
		return
	}
	g := w.cls
	for len(g.members) < realClassicSize {
		g.next++
		g.members = append(g.members, &classicMember{name: fmt.Sprintf("c%d", g.next)})
	}
	now := w.clk.Now()
	for _, m := range append([]*classicMember(nil), g.members...) {
		if r := m.req; r != nil {
			switch {
			case r.node < 1 || !w.brokers[r.node-1].up || w.grp.coords[r.node] == nil || !now.Before(m.timeout):
				m.req = nil // the coordinator went away, or the client gave up
				m.gen, m.synced = -1, false
			case r.poll():
				if m.req == r {
					m.req = nil
				}
			}
			continue
		}
		if now.Before(m.stallUntil) || now.Before(m.hbAt) {
			continue
		}
		if nemesis && w.chance(0.01) {
			w.tracef("classic member %s crashes", m.name)
			g.members = slices.DeleteFunc(g.members, func(x *classicMember) bool { return x == m })
			continue
		}
		m.hbAt = now.Add(time.Duration(50+w.rng.IntN(250)) * time.Millisecond)
		node, c := w.groupCoordinatorOf(realClassicGroup)
		if c == nil {
			continue
		}
		switch {
		case m.gen <= 0:
			w.classicJoin(m, node)
		case !m.synced:
			w.classicSync(m, node)
		case w.chance(0.01):
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Version, req.Group = 3, realClassicGroup
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = m.id
			req.Members = append(req.Members, lm)
			c.LeaveGroup(req)
			w.tracef("classic member %s leaves", m.name)
			g.members = slices.DeleteFunc(g.members, func(x *classicMember) bool { return x == m })
		default:
			req := kmsg.NewPtrHeartbeatRequest()
			req.Version, req.Group, req.Generation, req.MemberID = 4, realClassicGroup, m.gen, m.id
			switch e := kerr.ErrorForCode(c.Heartbeat(req).ErrorCode); e {
			case nil:
			case kerr.UnknownMemberID:
				m.id, m.gen, m.synced = "", 0, false
			default:
				m.gen, m.synced = 0, false // rejoin
			}
		}
	}
}

// groupCoordinatorOf finds a group's coordinator as a client does.
func (w *realWorld) groupCoordinatorOf(group string) (int32, *group.Coordinator) {
	up := w.upBrokers()
	if len(up) == 0 {
		return -1, nil
	}
	c := w.grp.coords[up[w.rng.IntN(len(up))].id]
	if c == nil {
		return -1, nil
	}
	node, _, _, err := c.Coordinator(group)
	if err != nil || node < 1 || node > realBrokers || !w.brokers[node-1].up || w.grp.coords[node] == nil {
		return -1, nil
	}
	return node, w.grp.coords[node]
}

func (w *realWorld) classicJoin(m *classicMember, node int32) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID = 5, realClassicGroup, m.id
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = 6000, 3000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "sim", []byte{0}
	req.Protocols = append(req.Protocols, p)
	m.timeout = w.clk.Now().Add(5 * time.Second)
	res := w.grp.coords[node].JoinGroup(req, "sim", "127.0.0.1")
	m.node = node
	m.req = &coordReq{node: node, poll: poll(txn.Result[*kmsg.JoinGroupResponse]{Resp: res.Resp, Wait: res.Wait, Poll: res.Poll}, func(resp *kmsg.JoinGroupResponse) {
		switch e := kerr.ErrorForCode(resp.ErrorCode); e {
		case nil:
			m.id, m.gen, m.synced, m.leader, m.leaderID = resp.MemberID, resp.Generation, false, resp.LeaderID == resp.MemberID, resp.LeaderID
			w.cls.names[m.id] = m.name
			m.members = m.members[:0]
			for _, x := range resp.Members {
				m.members = append(m.members, x.MemberID)
			}
			// In the order of the members' names: their ids are random.
			slices.SortFunc(m.members, func(a, b string) int { return strings.Compare(w.cls.names[a]+"/"+a, w.cls.names[b]+"/"+b) })
			w.tracef("classic member %s joined generation %d (leader %v)", m.name, m.gen, m.leader)
		case kerr.MemberIDRequired:
			m.id = resp.MemberID
			w.cls.names[m.id] = m.name
		case kerr.UnknownMemberID:
			m.id = ""
		}
	})}
	if m.req.poll() {
		m.req = nil
	}
}

func (w *realWorld) classicSync(m *classicMember, node int32) {
	g := w.cls
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.Generation, req.MemberID = 3, realClassicGroup, m.gen, m.id
	gen, leaderID := m.gen, m.leaderID
	if m.leader {
		plan := map[string][]int32{}
		for p := int32(0); p < realClassicParts; p++ {
			id := m.members[int(p)%len(m.members)]
			plan[id] = append(plan[id], p)
		}
		for _, id := range m.members {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = id, encodeParts(plan[id])
			req.GroupAssignment = append(req.GroupAssignment, a)
		}
	}
	m.timeout = w.clk.Now().Add(5 * time.Second)
	res := w.grp.coords[node].SyncGroup(req)
	m.req = &coordReq{node: node, poll: poll(txn.Result[*kmsg.SyncGroupResponse]{Resp: res.Resp, Wait: res.Wait, Poll: res.Poll}, func(resp *kmsg.SyncGroupResponse) {
		if resp.ErrorCode != 0 {
			if resp.ErrorCode == kerr.UnknownMemberID.Code {
				m.id = ""
			}
			m.gen, m.synced = 0, false
			return
		}
		parts := decodeParts(resp.MemberAssignment)
		g.syncs++
		m.synced = true
		w.checkClassic(m, gen, leaderID, parts)
	})}
	if m.req.poll() {
		m.req = nil
	}
}

// checkClassic: no partition of generation gen is owned by two members,
// and m got what gen's leader sent for it.
func (w *realWorld) checkClassic(m *classicMember, gen int32, leaderID string, parts []int32) {
	g := w.cls
	key := classicGen{gen: gen, leader: leaderID}
	if g.owner[key] == nil {
		g.owner[key] = map[int32]string{}
	}
	for _, p := range parts {
		if o, ok := g.owner[key][p]; ok && o != m.id {
			w.fail("classic members %s and %s both own partition %d in generation %d (leader %s)", g.names[o], m.name, p, gen, g.names[leaderID])
			return
		}
		g.owner[key][p] = m.id
	}
	w.tracef("classic member %s owns %v in generation %d (leader %s)", m.name, parts, gen, g.names[leaderID])
}

// classicGen is one generation of one incarnation of the group: an
// empty group without offsets is deleted (the offsets retention pass,
// as Kafka's), and the next one starts again at generation 1. Member ids
// are never reused, so the generation's leader names the incarnation.
type classicGen struct {
	gen    int32
	leader string
}

func encodeParts(ps []int32) []byte {
	out := make([]byte, 4*len(ps))
	for i, p := range ps {
		binary.BigEndian.PutUint32(out[4*i:], uint32(p))
	}
	return out
}

func decodeParts(b []byte) []int32 {
	var out []int32
	for len(b) >= 4 {
		out = append(out, int32(binary.BigEndian.Uint32(b)))
		b = b[4:]
	}
	return out
}
