package group

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state (Kafka's GroupState).
type State int8

// Group states. A group moves Empty -> PreparingRebalance (members join)
// -> CompletingRebalance (join responses sent, waiting for the leader's
// SyncGroup) -> Stable, and back to PreparingRebalance whenever membership
// or subscriptions change. Dead is a deleted group.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

// String is the state's name as DescribeGroups and ListGroups report it.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// TopicPartition names a partition whose offset a group commits.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Offset is a committed offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  time.Time
	// logOffset is where the commit record sits in __consumer_offsets:
	// of two commits of one partition applied out of order, the later
	// record wins, as it would on a reload.
	logOffset int64
}

type protocol struct {
	name     string
	metadata []byte
}

// member is one member of a group.
type member struct {
	id               string
	instanceID       *string // static membership (KIP-345)
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []protocol
	assignment       []byte
	seq              uint64 // join order, for stable listings

	// joinWait / syncWait are set while a JoinGroup / SyncGroup waits for
	// the rebalance. Each is answered exactly once (buffered, size 1).
	joinWait chan *kmsg.JoinGroupResponse
	syncWait chan *kmsg.SyncGroupResponse
	// expireAt is when the member is removed unless it heartbeats; members
	// waiting in JoinGroup or SyncGroup do not expire.
	expireAt time.Time
	isNew    bool
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

func (m *member) static() bool { return m.instanceID != nil }

func (m *member) sameProtocols(ps []protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].name != m.protocols[i].name || string(ps[i].metadata) != string(m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// storeOp is a write of group metadata to __consumer_offsets requested by
// the state machine. then, if set, runs (under the coordinator's lock) once
// the record is durable or failed.
type storeOp struct {
	rec  record
	then func(now time.Time, err error)
}

// Group is one classic consumer group: a state machine driven by requests
// and by time. It does no I/O and takes no locks: the coordinator
// serializes calls, persists the records it asks for (stores) and calls
// Tick at NextDeadline.
type Group struct {
	id           string
	cfg          *Config
	state        State
	stateSince   time.Time
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	static       map[string]string    // instance id -> member id
	pending      map[string]time.Time // KIP-394 member ids handed out, by expiry
	awaiting     int                  // members waiting in JoinGroup
	seq          uint64

	joinDeadline     time.Time // PreparingRebalance: when the join phase ends
	initialDelay     bool      // the join phase is group.initial.rebalance.delay.ms
	initialRemaining time.Duration
	newMemberAdded   bool

	subscribed map[string]bool // consumer-protocol topics; nil when unknown

	offsets        map[TopicPartition]Offset
	pendingCommits map[TopicPartition]int   // appended, not yet durable
	tombstones     map[TopicPartition]int64 // deletions racing pending commits
	// txn holds the transactional offsets (TxnOffsetCommit) of each
	// producer id whose transaction has not ended yet (txn_offsets.go).
	txn map[int64]map[TopicPartition]Offset

	stores []storeOp

	// removedTxn and removedState are what removeGroup cleared, for
	// unremoveGroup.
	removedTxn   map[int64]map[TopicPartition]Offset
	removedState State
}

func newGroup(id string, cfg *Config, now time.Time) *Group {
	return &Group{id: id, cfg: cfg, stateSince: now, members: map[string]*member{},
		static: map[string]string{}, pending: map[string]time.Time{},
		offsets: map[TopicPartition]Offset{}, pendingCommits: map[TopicPartition]int{},
		tombstones: map[TopicPartition]int64{}, txn: map[int64]map[TopicPartition]Offset{}}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// State is the current state.
func (g *Group) State() State { return g.state }

// Generation is the current generation id.
func (g *Group) Generation() int32 { return g.generation }

// Leader is the current leader's member id ("" without members).
func (g *Group) Leader() string { return g.leader }

// NumMembers is the number of members.
func (g *Group) NumMembers() int { return len(g.members) }

func (g *Group) transition(s State, now time.Time) {
	g.state = s
	g.stateSince = now
}

func (g *Group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// drainStores returns and clears the stores requested since the last call.
func (g *Group) drainStores() []storeOp {
	s := g.stores
	g.stores = nil
	return s
}

func (g *Group) store(assignment map[string][]byte, then func(time.Time, error)) {
	g.stores = append(g.stores, storeOp{rec: groupRecord(g, assignment), then: then})
}

// rebalanceTimeout is the longest rebalance timeout of the members.
func (g *Group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// supportsProtocols reports whether a member (other than except) with this
// protocol type and protocols may be in the group: same type, and at least
// one protocol every other member supports.
func (g *Group) supportsProtocols(ptype string, ps []protocol, except string) bool {
	others := 0
	for id := range g.members {
		if id != except {
			others++
		}
	}
	if others == 0 {
		return ptype != "" && len(ps) > 0
	}
	if ptype != g.protocolType {
		return false
	}
	for _, p := range ps {
		n := 0
		for id, m := range g.members {
			if id != except && hasProtocol(m, p.name) {
				n++
			}
		}
		if n == others {
			return true
		}
	}
	return false
}

func hasProtocol(m *member, name string) bool {
	for _, p := range m.protocols {
		if p.name == name {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol for the next generation: among the
// protocols every member supports, each member votes for its most
// preferred; most votes wins, ties going to the leader's preference order.
func (g *Group) selectProtocol() string {
	ms := g.sortedMembers()
	if len(ms) == 0 {
		return ""
	}
	common := func(name string) bool {
		for _, m := range ms {
			if !hasProtocol(m, name) {
				return false
			}
		}
		return true
	}
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			if common(p.name) {
				votes[p.name]++
				break
			}
		}
	}
	order := ms[0].protocols
	if l := g.members[g.leader]; l != nil {
		order = l.protocols
	}
	best, bestVotes := "", -1
	for _, p := range order {
		if v, ok := votes[p.name]; ok && v > bestVotes {
			best, bestVotes = p.name, v
		}
	}
	return best
}

// computeSubscribed derives the subscribed topics of a "consumer" group
// from its members' subscriptions (used by OffsetDelete and expiry).
func (g *Group) computeSubscribed() {
	g.subscribed = nil
	if g.protocolType != "consumer" || g.protocol == "" {
		return
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return
		}
		for _, t := range md.Topics {
			topics[t] = true
		}
	}
	g.subscribed = topics
}

// subscribedTo reports whether the group consumes topic (true when the
// group is not a consumer group or its subscriptions are unknown).
func (g *Group) subscribedTo(topic string) bool {
	if g.subscribed == nil {
		return true
	}
	return g.subscribed[topic]
}

// NextDeadline is when Tick next has work: a member or pending member
// expiring, or the join phase ending. Zero means no deadline.
func (g *Group) NextDeadline() time.Time {
	var d time.Time
	earlier := func(t time.Time) {
		if d.IsZero() || t.Before(d) {
			d = t
		}
	}
	for _, exp := range g.pending {
		earlier(exp)
	}
	for _, m := range g.members {
		if m.joinWait == nil && m.syncWait == nil {
			earlier(m.expireAt)
		}
	}
	if g.state == PreparingRebalance {
		earlier(g.joinDeadline)
	}
	return d
}

// Tick expires members and pending members whose session ran out and ends
// a join phase whose deadline passed.
func (g *Group) Tick(now time.Time) {
	changed := false
	for id, exp := range g.pending {
		if !now.Before(exp) {
			delete(g.pending, id)
			changed = true
		}
	}
	for _, m := range g.sortedMembers() {
		if m.joinWait == nil && m.syncWait == nil && !now.Before(m.expireAt) {
			g.removeMember(now, m, kerr.UnknownMemberID.Code)
		}
	}
	if changed {
		g.tryCompleteJoin(now)
	}
	if g.state != PreparingRebalance || now.Before(g.joinDeadline) {
		return
	}
	if g.initialDelay && g.newMemberAdded && g.initialRemaining > 0 {
		// InitialDelayedJoin: members keep arriving, wait a little more
		// (never past the rebalance timeout).
		g.newMemberAdded = false
		d := min(g.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining -= d
		g.joinDeadline = now.Add(d)
		if d > 0 {
			return
		}
	}
	g.completeJoin(now)
}

// removeMember drops m, answering its waiting requests with code, and moves
// the group on: a stable or completing group rebalances, a joining group
// may now be complete.
func (g *Group) removeMember(now time.Time, m *member, code int16) {
	if m.joinWait != nil {
		m.joinWait <- joinError(code, m.id)
		m.joinWait = nil
		g.awaiting--
	}
	if m.syncWait != nil {
		m.syncWait <- syncError(code)
		m.syncWait = nil
	}
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance(now)
	case PreparingRebalance:
		g.tryCompleteJoin(now)
	}
}

// prepareRebalance starts a join phase.
func (g *Group) prepareRebalance(now time.Time) {
	if g.state == CompletingRebalance {
		// The assignment being computed is void: tell syncing members.
		for _, m := range g.members {
			m.assignment = nil
			if m.syncWait != nil {
				m.syncWait <- syncError(kerr.RebalanceInProgress.Code)
				m.syncWait = nil
			}
		}
	}
	timeout := g.rebalanceTimeout()
	if g.state == Empty {
		g.initialDelay = true
		g.newMemberAdded = false
		delay := min(g.cfg.InitialRebalanceDelay, timeout)
		g.initialRemaining = max(timeout-delay, 0)
		g.joinDeadline = now.Add(delay)
	} else {
		g.initialDelay = false
		g.joinDeadline = now.Add(timeout)
	}
	g.transition(PreparingRebalance, now)
	g.tryCompleteJoin(now)
}

// maybePrepareRebalance starts a join phase unless one is running.
func (g *Group) maybePrepareRebalance(now time.Time) {
	switch g.state {
	case Empty, Stable, CompletingRebalance:
		g.prepareRebalance(now)
	}
}

// tryCompleteJoin ends the join phase early once every member (and every
// member id handed out by MEMBER_ID_REQUIRED) has joined; the initial delay
// always runs its course.
func (g *Group) tryCompleteJoin(now time.Time) {
	if g.state != PreparingRebalance || g.initialDelay {
		return
	}
	if g.awaiting == len(g.members) && len(g.pending) == 0 {
		g.completeJoin(now)
	}
}

// completeJoin ends the join phase: members that did not rejoin are dropped
// (static ones stay until their session expires), a leader that rejoined is
// chosen, and the next generation starts.
func (g *Group) completeJoin(now time.Time) {
	for _, m := range g.sortedMembers() {
		if m.joinWait == nil && !m.static() {
			g.removeMemberQuiet(m)
		}
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined: wait another
		// rebalance timeout for them to rejoin or expire.
		g.initialDelay = false
		g.joinDeadline = now.Add(g.rebalanceTimeout())
		return
	}
	g.generation++
	g.initialDelay = false
	if len(g.members) == 0 {
		g.protocol = ""
		g.leader = ""
		g.subscribed = nil
		g.transition(Empty, now)
		g.store(nil, nil)
		return
	}
	g.protocol = g.selectProtocol()
	g.computeSubscribed()
	g.transition(CompletingRebalance, now)
	for _, m := range g.sortedMembers() {
		if m.joinWait != nil {
			m.joinWait <- g.joinResponse(m, g.leader)
			m.joinWait = nil
		}
		m.isNew = false
		m.expireAt = now.Add(m.sessionTimeout)
	}
	g.awaiting = 0
}

// removeMemberQuiet drops a member during completeJoin (it has no waiter).
func (g *Group) removeMemberQuiet(m *member) {
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
	}
}

// electJoinedLeader keeps the leader if it rejoined, else picks the first
// member that did. It reports false when no member rejoined.
func (g *Group) electJoinedLeader() bool {
	if l := g.members[g.leader]; l != nil && l.joinWait != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.joinWait != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// joinResponse is the successful JoinGroup answer for m; the leader gets
// every member's metadata for the chosen protocol.
func (g *Group) joinResponse(m *member, leader string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	r.ProtocolType = &pt
	r.Protocol = &p
	r.LeaderID = leader
	r.MemberID = m.id
	if m.id == leader {
		for _, o := range g.sortedMembers() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = o.id
			rm.InstanceID = o.instanceID
			rm.ProtocolMetadata = o.metadataFor(g.protocol)
			r.Members = append(r.Members, rm)
		}
	}
	return r
}

func joinError(code int16, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode = code
	r.MemberID = memberID
	return r
}

func syncError(code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	return r
}
