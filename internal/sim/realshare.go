package sim

import (
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/sharecoord"
	"github.com/sluice-io/sluice/internal/txn"
)

// Share groups (KIP-932) in the real-broker world, in the seeds that run
// them (RealOptions.Share). The topic realShareTopic (t1: one partition,
// RF 3, min ISR 2, written by the world's plain, idempotent and
// transactional producers) is read by one share group (read_uncommitted:
// control batches are archived, aborted data delivered): members (simulated clients)
// join and heartbeat through the real stepped group coordinator
// (ShareGroupHeartbeat), and fetch from the partition's leader with the
// real ShareFetch and ShareAcknowledge handlers (realsharenet.go), whose
// share partitions keep their state through the real share coordinator
// on __share_group_state (one partition, RF 3, min ISR 2; the broker's
// stepped sharecoord.Coordinator). A member acknowledges what it holds
// (accept, release, reject, or nothing), piggybacked on its next
// ShareFetch or in a ShareAcknowledge; it may stall past its locks, close
// its share session, hang for good with its connections open, or crash:
// its connections close and the leader releases its locks
// (handler.Options.WatchShareConn); a new member takes the place of a
// hung or crashed one. Leader and coordinator failovers come from the
// world's faults.
//
// Invariants (realsharecheck.go), checked at each answer: (a) an offset
// is acquired by at most one member at a time in one share partition (a
// leader's, in one leader epoch); (b) an offset whose accept or reject
// was answered without error is never delivered again; (d) a delivery
// count never exceeds share.delivery.count.limit, grows from one
// delivery to the next within a share partition, and never goes back
// across share partitions (leader failovers: a new leader loads the
// durable state, which holds each lock's expiry) but for one of an older
// leader epoch that serves on. After settling: (c) the
// members drain the partition, then every offset below the high
// watermark is acknowledged or archived in the durable state, each with
// a reason (an accept or reject sent, or the delivery limit reached).

const (
	realShareTopic  = "t1"
	realShareGroup  = "sim-share"
	realShareLockMs = 400 // share.record.lock.duration.ms
	realShareLimit  = 3   // share.delivery.count.limit
	realShareSize   = 3   // members at once
)

// simShare is the share group's members and the world's side of the
// share partitions and coordinators.
type simShare struct {
	on     bool
	knobs  share.Knobs
	coords map[int32]*sharecoord.Coordinator
	calls  chan *shareCall
	// running holds the baton (realsharenet.go); reqs are the requests
	// under way.
	running *shareReq
	reqs    []*shareReq
	// watches are the releases the leaders asked to run when a
	// connection closes (handler.Options.WatchShareConn).
	watches  map[*protocol.Local][]func()
	releases []pendingRelease

	// init initializes the share partition's state at offset 0 before
	// any member fetches (what Kafka's group coordinator does with
	// InitializeShareGroupState); inited once answered.
	init    *shareCall
	inited  bool
	members []*shareMember
	nextID  int
	recs    map[int64]*shareRec
	// draining is set while checkShareSettled drains the partition;
	// crashLeader is the leader it crashes once (realsharecheck.go).
	draining    bool
	crashLeader int32

	// Stats.
	fetches, acquired, accepted, rejected, released, memberCrashes, stalls, expired int
}

type pendingRelease struct {
	broker int32
	proc   *sbroker.Broker
	fn     func()
	member string
}

// shareMember is one simulated share consumer.
type shareMember struct {
	id    string
	name  string // for the trace
	epoch int32  // member epoch; 0 to join
	hb    *coordReq
	// hbAt is when the next heartbeat is due, hbTimeout when the one in
	// flight is given up.
	hbAt, hbTimeout time.Time
	conns           map[int32]*memberConn
	// held are the offsets it holds, as the client knows them.
	held       map[int64]heldRec
	busy       bool
	stallUntil time.Time
}

// memberConn is a member's connection to one broker process and its
// share session there.
type memberConn struct {
	proc  *sbroker.Broker
	local *protocol.Local
	epoch int32 // the next ShareSessionEpoch: 0 opens
}

type heldRec struct {
	broker int32
	proc   *sbroker.Broker
	epoch  int32 // the leader epoch it was acquired in
}

func newSimShare(on bool) *simShare {
	return &simShare{on: on, coords: map[int32]*sharecoord.Coordinator{}, calls: make(chan *shareCall),
		watches: map[*protocol.Local][]func(){}, recs: map[int64]*shareRec{}}
}

// shareBrokerConfig sets the share settings of the simulated brokers.
func shareBrokerConfig(props map[string]string) {
	props["group.share.min.record.lock.duration.ms"] = "100"
	props["group.share.record.lock.duration.ms"] = fmt.Sprint(realShareLockMs)
	props["group.share.delivery.count.limit"] = fmt.Sprint(realShareLimit)
	props["group.share.heartbeat.interval.ms"] = "500"
}

// newShareCoordinator returns rb's stepped share coordinator.
func (w *realWorld) newShareCoordinator(rb *realBroker) *sharecoord.Coordinator {
	c := sharecoord.New(rb.b, sharecoord.Options{Stepped: true, Config: sharecoord.Config{
		NumPartitions: 1, ReplicationFactor: realBrokers, MinISR: 2, SegmentBytes: 4096,
		SnapshotUpdateRecords: 4, PruneInterval: 1500 * time.Millisecond}})
	w.shr.coords[rb.id] = c
	return c
}

// watchShareConn records a leader's release of a connection's share
// sessions, run when the simulator closes the connection.
func (w *realWorld) watchShareConn(_ *protocol.Conn, release func()) {
	if r := w.shr.running; r != nil && r.local != nil {
		w.shr.watches[r.local] = append(w.shr.watches[r.local], release)
	}
}

// createShareTopics creates __share_group_state as the share coordinator
// would (a stepped one could too, on first use; the simulator creates it
// at the start as it does the other coordinators' topics).
func (w *realWorld) createShareTopics() {
	cfgs := map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1", "segment.bytes": "4096", "min.insync.replicas": "2"}
	if err := w.brokers[0].b.CreateTopic(sharecoord.Topic, 1, realBrokers, cfgs, false); err != nil {
		w.fail("create topic %s: %v", sharecoord.Topic, err)
	}
}

// shareKey is the share partition of realShareTopic-0.
func (w *realWorld) shareKey() share.Key {
	return share.Key{Group: realShareGroup, TopicID: w.ctrl.image().Topics[realShareTopic].ID, Partition: 0}
}

// newShareMember adds a member with a fresh id.
func (w *realWorld) newShareMember() *shareMember {
	w.shr.nextID++
	var raw [16]byte
	copy(raw[:], fmt.Sprintf("member-%09d", w.shr.nextID))
	m := &shareMember{id: base64.RawURLEncoding.EncodeToString(raw[:]), name: fmt.Sprintf("m%d", w.shr.nextID), conns: map[int32]*memberConn{}, held: map[int64]heldRec{}}
	w.shr.members = append(w.shr.members, m)
	return m
}

// shareStep moves the share group one step; faults only when nemesis.
func (w *realWorld) shareStep(nemesis bool) {
	if !w.shr.on {
		return
	}
	w.drainShareCoords()
	w.shareCalls()
	w.shareReleases()
	w.shareExpiry()
	if !w.shareInit() {
		return
	}
	for len(w.shr.members) < realShareSize {
		w.newShareMember()
	}
	for _, m := range append([]*shareMember(nil), w.shr.members...) {
		w.shareHeartbeat(m)
	}
	if !w.chance(0.4) {
		return
	}
	m := w.shr.members[w.rng.IntN(len(w.shr.members))]
	now := w.clk.Now()
	if m.busy || m.epoch <= 0 || now.Before(m.stallUntil) {
		return
	}
	switch k := w.rng.IntN(100); {
	case nemesis && k < 2:
		w.shareCrash(m)
	case nemesis && k < 3:
		// Hung for good with its connections open (a half-open TCP
		// connection): only the locks' expiry brings its records back.
		w.tracef("share member %s hangs", m.name)
		w.shr.stalls++
		w.shareRemove(m)
		w.newShareMember()
	case nemesis && k < 5:
		// A pause longer than the lock: the member's records come back.
		m.stallUntil = now.Add(time.Duration(realShareLockMs+w.rng.IntN(2*realShareLockMs)) * time.Millisecond)
		w.shr.stalls++
		w.tracef("share member %s stalls until %d", m.name, m.stallUntil.Sub(w.start).Milliseconds())
	case k < 6:
		w.shareAcknowledge(m, true)
	case k < 30:
		w.shareAcknowledge(m, false)
	default:
		w.shareFetch(m, false)
	}
}

// shareExpiry runs the expiry sweep (handler.Handlers.ExpireShareLocks,
// which a broker's goroutine runs every share.ExpirySweepInterval) on each
// up broker that runs no share request and whose share partition has a
// passed lock to persist, as Kafka's timer task fires at the lock's
// deadline.
func (w *realWorld) shareExpiry() {
	now := w.clk.Now()
	for _, rb := range w.upBrokers() {
		if w.shareBusy(rb.id) {
			continue
		}
		if sp := rb.h.SharePartitions().Held(w.shareKey()); sp == nil || !sp.ExpiryDue(now) {
			continue
		}
		w.tracef("broker %d persists its share partition's expired locks", rb.id)
		w.shareRun(&shareReq{broker: rb.id, proc: rb.b}, rb.h.ExpireShareLocks)
	}
}

// shareSetup initializes the share partition's state before the faults
// begin: the healthy cluster runs until that is done.
func (w *realWorld) shareSetup() {
	for i := 0; i < 400 && w.failed == "" && !w.shr.inited; i++ {
		w.control(0)
		w.healthyRound(nil)
		w.drainShareCoords()
		w.shareInit()
	}
	if !w.shr.inited {
		w.fail("the share state of %s-0 was not initialized in a healthy cluster", realShareTopic)
	}
}

// shareInit initializes the share partition's state at offset 0 (so
// that no record is produced before the group's start) and reports
// whether that is done.
func (w *realWorld) shareInit() bool {
	sh := w.shr
	if sh.inited {
		return true
	}
	c := sh.init
	if c != nil && c.answered && c.ans.err != nil {
		w.tracef("share state initialization from %d: %v", c.from, c.ans.err)
	}
	if c == nil || c.answered && c.ans.err != nil {
		c = &shareCall{from: int32(1 + w.rng.IntN(realBrokers)), kind: shareCallInit, key: w.shareKey(),
			deadline: w.clk.Now().Add(realSharePersisterTimeout), backoff: 50 * time.Millisecond}
		sh.init = c
	}
	if !w.brokers[c.from-1].up {
		sh.init = nil
		return false
	}
	w.shareCallDue(c)
	if c.answered && c.ans.err == nil {
		sh.inited = true
		w.tracef("share state of %s-0 initialized at 0", realShareTopic)
	}
	return sh.inited
}

// shareHeartbeat sends m's heartbeat when due and takes its answer.
func (w *realWorld) shareHeartbeat(m *shareMember) {
	now := w.clk.Now()
	if r := m.hb; r != nil {
		switch {
		case r.node < 1 || !w.brokers[r.node-1].up || w.grp.coords[r.node] == nil:
			m.hb = nil // the coordinator went away with the request
		case r.poll():
			if m.hb == r {
				m.hb = nil
			}
		case !now.Before(m.hbTimeout):
			m.hb = nil // request.timeout.ms, scaled down: the client gives up
		}
		return
	}
	if now.Before(m.hbAt) || now.Before(m.stallUntil) {
		return
	}
	m.hbAt = now.Add(time.Duration(100+w.rng.IntN(400)) * time.Millisecond)
	node, c := w.shareGroupCoordinator()
	if c == nil {
		return
	}
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.MemberEpoch = 1, realShareGroup, m.id, m.epoch
	if m.epoch == 0 {
		req.SubscribedTopicNames = []string{realShareTopic}
	}
	m.hbTimeout = now.Add(realSharePersisterTimeout)
	res := c.ShareGroupHeartbeat(req, "sim", "127.0.0.1")
	m.hb = &coordReq{node: node, poll: poll(txn.Result[*kmsg.ShareGroupHeartbeatResponse]{Resp: res.Resp, Wait: res.Wait, Poll: res.Poll},
		func(resp *kmsg.ShareGroupHeartbeatResponse) {
			switch e := kerr.ErrorForCode(resp.ErrorCode); e {
			case nil:
				if m.epoch == 0 {
					w.tracef("share member %s joined at epoch %d", m.name, resp.MemberEpoch)
				}
				m.epoch = resp.MemberEpoch
			case kerr.FencedMemberEpoch, kerr.UnknownMemberID:
				m.epoch = 0
				fallthrough
			default:
				w.tracef("share member %s: heartbeat at epoch %d: %v", m.name, req.MemberEpoch, e)
			}
		})}
	if m.hb.poll() {
		m.hb = nil
	}
}

// shareGroupCoordinator finds the share group's coordinator.
func (w *realWorld) shareGroupCoordinator() (int32, *group.Coordinator) {
	up := w.upBrokers()
	if len(up) == 0 {
		return -1, nil
	}
	c := w.grp.coords[up[w.rng.IntN(len(up))].id]
	if c == nil {
		return -1, nil
	}
	node, _, _, err := c.Coordinator(realShareGroup)
	if err != nil || node < 1 || node > realBrokers || !w.brokers[node-1].up || w.grp.coords[node] == nil {
		return -1, nil
	}
	return node, w.grp.coords[node]
}

// shareConn returns m's connection to the leader of realShareTopic-0 as
// the image names it, or nil.
func (w *realWorld) shareConn(m *shareMember) (int32, *memberConn) {
	leader := w.ctrl.image().Topics[realShareTopic].Partitions[0].Leader
	if leader < 1 || !w.brokers[leader-1].up || w.shareBusy(leader) {
		return -1, nil
	}
	rb := w.brokers[leader-1]
	mc := m.conns[leader]
	if mc == nil || mc.proc != rb.b {
		mc = &memberConn{proc: rb.b, local: protocol.NewLocal(rb.reg)}
		m.conns[leader] = mc
	}
	return leader, mc
}

// shareAcks picks m's acknowledgements of the records it holds from
// leader's process: accept, release, reject, or none yet. all
// acknowledges every one (accept or reject).
func (w *realWorld) shareAcks(m *shareMember, leader int32, proc *sbroker.Broker, all bool) (map[int64]int8, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) {
	var offs []int64
	for o, h := range m.held {
		if h.broker == leader && h.proc == proc {
			offs = append(offs, o)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	types := map[int64]int8{}
	var batches []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
	for _, o := range offs {
		var t int8
		switch k := w.rng.IntN(100); {
		case k < 60 || all && k < 90:
			t = share.AckAccept
		case k < 75 && !all:
			t = share.AckRelease
		case k < 85 || all:
			t = share.AckReject
		default:
			continue
		}
		types[o] = t
		b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = o, o, []int8{t}
		batches = append(batches, b)
	}
	return types, batches
}

// shareFetch sends m's ShareFetch to the leader, with acknowledgements
// of what it holds there unless it opens its session.
func (w *realWorld) shareFetch(m *shareMember, all bool) {
	leader, mc := w.shareConn(m)
	if mc == nil {
		return
	}
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 1
	group, member := realShareGroup, m.id
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, mc.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 0, 1, 1<<20, int32(1+w.rng.IntN(6)), 500
	t := kmsg.NewShareFetchRequestTopic()
	t.TopicID = w.shareKey().TopicID
	p := kmsg.NewShareFetchRequestTopicPartition()
	var types map[int64]int8
	if mc.epoch > 0 {
		types, p.AcknowledgementBatches = w.shareAcks(m, leader, mc.proc, all)
	}
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	w.shareSendReq(m, leader, mc, req, types)
}

// shareAcknowledge sends m's ShareAcknowledge to the leader; closing
// also ends its share session there (epoch -1), releasing what it did
// not acknowledge.
func (w *realWorld) shareAcknowledge(m *shareMember, closing bool) {
	leader, mc := w.shareConn(m)
	if mc == nil || mc.epoch == 0 {
		return
	}
	types, batches := w.shareAcks(m, leader, mc.proc, false)
	if len(batches) == 0 && !closing {
		return
	}
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = 1
	group, member := realShareGroup, m.id
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, mc.epoch
	if closing {
		req.ShareSessionEpoch = share.FinalEpoch
	}
	t := kmsg.NewShareAcknowledgeRequestTopic()
	t.TopicID = w.shareKey().TopicID
	p := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, b := range batches {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
		p.AcknowledgementBatches = append(p.AcknowledgementBatches, ab)
	}
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	w.shareSendReq(m, leader, mc, req, types)
}

// shareSendReq runs req on leader's handlers over mc and applies the
// answer. types are the acknowledgements it carries.
func (w *realWorld) shareSendReq(m *shareMember, leader int32, mc *memberConn, req kmsg.Request, types map[int64]int8) {
	rb := w.brokers[leader-1]
	for o, t := range types {
		w.shareSent(o, t)
	}
	m.busy = true
	r := &shareReq{broker: leader, proc: rb.b, local: mc.local, member: m}
	var resp kmsg.Response
	var err error
	r.finish = func() {
		m.busy = false
		w.shareAnswer(m, r, mc, req, resp, err, types)
	}
	w.shareRun(r, func() { resp, err = mc.local.Do("sim-share", req) })
}

// shareBrokerGone forgets the members' connections to broker id and
// the members' requests there.
func (w *realWorld) shareBrokerGone(id int32) {
	for _, m := range w.shr.members {
		if mc := m.conns[id]; mc != nil {
			delete(w.shr.watches, mc.local)
			delete(m.conns, id)
		}
		for o, h := range m.held {
			if h.broker == id {
				delete(m.held, o)
			}
		}
	}
}

// shareCrash crashes m: its connections close (each leader then
// releases its locks), and a new member takes its place.
func (w *realWorld) shareCrash(m *shareMember) {
	w.shr.memberCrashes++
	w.tracef("share member %s crashes", m.name)
	ids := make([]int32, 0, len(m.conns))
	for id := range m.conns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		mc := m.conns[id]
		mc.local.Close()
		for _, fn := range w.shr.watches[mc.local] {
			w.shr.releases = append(w.shr.releases, pendingRelease{broker: id, proc: mc.proc, fn: fn, member: m.id})
		}
		delete(w.shr.watches, mc.local)
	}
	w.shareRemove(m)
	w.newShareMember()
}

// shareRemove drops m from the members.
func (w *realWorld) shareRemove(m *shareMember) {
	for i, x := range w.shr.members {
		if x == m {
			w.shr.members = append(w.shr.members[:i], w.shr.members[i+1:]...)
			return
		}
	}
}

// shareReleases runs the releases of closed connections, each once its
// broker runs no other share request (it may still be the process that
// asked for it).
func (w *realWorld) shareReleases() {
	kept := w.shr.releases[:0]
	var due []pendingRelease
	for _, pr := range w.shr.releases {
		rb := w.brokers[pr.broker-1]
		switch {
		case !rb.up || rb.b != pr.proc:
		case w.shareBusy(pr.broker):
			kept = append(kept, pr)
		default:
			due = append(due, pr)
		}
	}
	w.shr.releases = kept
	for _, pr := range due {
		if w.shareBusy(pr.broker) {
			w.shr.releases = append(w.shr.releases, pr)
			continue
		}
		r := &shareReq{broker: pr.broker, proc: pr.proc}
		member, broker, proc := pr.member, pr.broker, pr.proc
		r.finish = func() { w.shareReleased(member, w.shareInst(broker, proc)) }
		w.shareRun(r, pr.fn)
	}
}
