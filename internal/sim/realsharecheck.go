package sim

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/share"
)

// The share group's invariants (realshare.go).

// shareRec is what the world knows of one offset of realShareTopic-0.
type shareRec struct {
	// The member holding it, in which share partition (a leader's
	// instance: a new leader, or a reload after a fenced write, starts
	// one without locks) and, a lower bound of its lock deadline, until
	// when.
	held   bool
	holder string
	inst   *share.Partition
	until  time.Time
	// count is its last delivery count in countInst; maxCount the
	// highest delivery count seen, first given by a share partition of
	// leader epoch maxEpoch.
	count     int16
	countInst *share.Partition
	maxCount  int16
	maxEpoch  int32
	// confirmed is the acknowledgement (accept or reject) answered
	// without error; accepted and rejected say one was sent.
	confirmed          int8
	accepted, rejected bool
}

func (w *realWorld) shareRecOf(o int64) *shareRec {
	r := w.shr.recs[o]
	if r == nil {
		r = &shareRec{}
		w.shr.recs[o] = r
	}
	return r
}

// shareInst is leader's current share partition of the share group.
func (w *realWorld) shareInst(leader int32, proc *sbroker.Broker) *share.Partition {
	rb := w.brokers[leader-1]
	if !rb.up || rb.b != proc {
		return nil
	}
	return rb.h.SharePartitions().Held(w.shareKey())
}

// shareSent notes an acknowledgement sent.
func (w *realWorld) shareSent(o int64, t int8) {
	r := w.shareRecOf(o)
	switch t {
	case share.AckAccept:
		r.accepted = true
	case share.AckReject:
		r.rejected = true
	}
}

// shareAnswer applies the answer to a member's ShareFetch or
// ShareAcknowledge and checks it.
func (w *realWorld) shareAnswer(m *shareMember, r *shareReq, mc *memberConn, req kmsg.Request, resp kmsg.Response, err error, types map[int64]int8) {
	for o := range types {
		delete(m.held, o) // acknowledged, or the acknowledgement failed: the lock passes
	}
	if err != nil || resp == nil {
		mc.epoch = 0
		return
	}
	inst := w.shareInst(r.broker, r.proc)
	switch resp := resp.(type) {
	case *kmsg.ShareFetchResponse:
		w.shr.fetches++
		if resp.ErrorCode != 0 {
			w.tracef("share member %s: ShareFetch at epoch %d to %d: %v", m.name, req.(*kmsg.ShareFetchRequest).ShareSessionEpoch, r.broker, kerr.ErrorForCode(resp.ErrorCode))
			mc.epoch = 0
			return
		}
		mc.epoch++
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				w.shareAcked(m, r.broker, types, p.AcknowledgeErrorCode)
				if len(p.AcquiredRecords) > 0 || p.ErrorCode != 0 {
					var got []string
					for _, ar := range p.AcquiredRecords {
						got = append(got, itoa(ar.FirstOffset)+"-"+itoa(ar.LastOffset)+"x"+itoa(int64(ar.DeliveryCount)))
					}
					w.tracef("share member %s fetched from %d: %v %v", m.name, r.broker, got, kerr.ErrorForCode(p.ErrorCode))
				}
				for _, ar := range p.AcquiredRecords {
					for o := ar.FirstOffset; o <= ar.LastOffset; o++ {
						w.shareAcquired(m, r, inst, o, ar.DeliveryCount)
					}
					if sh := w.shr; sh.draining && sh.crashLeader == 0 && len(types) == 0 && ar.DeliveryCount >= 2 {
						sh.crashLeader = r.broker
					}
				}
			}
		}
	case *kmsg.ShareAcknowledgeResponse:
		if resp.ErrorCode != 0 {
			mc.epoch = 0
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				w.shareAcked(m, r.broker, types, p.ErrorCode)
			}
		}
		if req.(*kmsg.ShareAcknowledgeRequest).ShareSessionEpoch == share.FinalEpoch {
			mc.epoch = 0
			w.shareReleased(m.id, inst)
			for o := range m.held {
				if m.held[o].broker == r.broker {
					delete(m.held, o)
				}
			}
			return
		}
		mc.epoch++
	}
}

// shareAcknowledged applies the outcome code of acknowledgements types
// by m to leader.
func (w *realWorld) shareAcked(m *shareMember, leader int32, types map[int64]int8, code int16) {
	if len(types) == 0 {
		return
	}
	if code != 0 {
		w.tracef("share member %s: acknowledgement of %d offsets to %d: %v", m.name, len(types), leader, kerr.ErrorForCode(code))
		return
	}
	w.tracef("share member %s: %d acknowledgements confirmed by %d", m.name, len(types), leader)
	for o, t := range types {
		r := w.shareRecOf(o)
		if r.holder == m.id {
			r.held = false
		}
		switch t {
		case share.AckAccept:
			r.confirmed = t
			w.shr.accepted++
		case share.AckReject:
			r.confirmed = t
			w.shr.rejected++
		case share.AckRelease:
			w.shr.released++
		}
	}
}

// shareAcquired checks and notes offset o acquired by m in inst with
// delivery count n, answered to request r.
func (w *realWorld) shareAcquired(m *shareMember, r *shareReq, inst *share.Partition, o int64, n int16) {
	w.shr.acquired++
	rec := w.shareRecOf(o)
	now := w.clk.Now()
	where := func() string {
		return "share member " + m.name + " acquired " + realShareTopic + "-0@" + itoa(o) + " from broker " + itoa(int64(r.broker)) + " with delivery count " + itoa(int64(n))
	}
	switch {
	case rec.confirmed != 0:
		w.fail("(b) %s, whose %s was confirmed", where(), ackName(rec.confirmed))
	case n > realShareLimit:
		w.fail("(d) %s, above share.delivery.count.limit %d", where(), realShareLimit)
	case n < 1:
		w.fail("(d) %s, below 1", where())
	case inst != nil && rec.countInst == inst && n <= rec.count:
		w.fail("(d) %s; its previous delivery by the same share partition had count %d", where(), rec.count)
	case inst != nil && n < rec.maxCount && inst.LeaderEpoch() >= rec.maxEpoch:
		w.fail("(d) %s in leader epoch %d; it was delivered with count %d in leader epoch %d: its delivery count went back",
			where(), inst.LeaderEpoch(), rec.maxCount, rec.maxEpoch)
	case inst != nil && rec.held && rec.inst == inst && now.Before(rec.until):
		w.fail("(a) %s while member %s holds it until at least %d", where(), w.shareName(rec.holder), rec.until.Sub(w.start).Milliseconds())
	}
	if n > rec.maxCount {
		rec.maxEpoch = math.MaxInt32 // no share partition: compared with no later delivery
		if inst != nil {
			rec.maxEpoch = inst.LeaderEpoch()
		}
	}
	rec.count, rec.countInst, rec.maxCount = n, inst, max(rec.maxCount, n)
	rec.held, rec.holder, rec.inst, rec.until = inst != nil, m.id, inst, r.start.Add(realShareLockMs*time.Millisecond)
	m.held[o] = heldRec{broker: r.broker, proc: r.proc}
}

// shareReleased ends member's holds in inst: its share session closed,
// or its connection did and the leader released its locks.
func (w *realWorld) shareReleased(member string, inst *share.Partition) {
	if inst == nil {
		return
	}
	for _, rec := range w.shr.recs {
		if rec.held && rec.holder == member && rec.inst == inst {
			rec.held = false
		}
	}
}

func ackName(t int8) string {
	switch t {
	case share.AckAccept:
		return "accept"
	case share.AckReject:
		return "reject"
	case share.AckRelease:
		return "release"
	}
	return "acknowledgement " + itoa(int64(t))
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// checkShareSettled, after settling: (c) the members drain
// realShareTopic-0, accepting or rejecting everything they get (but for
// one that hangs holding records), until
// the leader's share partition starts at the high watermark; then every
// record below it must be acknowledged or archived in the durable state
// (markers need not be: archiving them is written with the next
// acknowledgement), each with a reason: an accept or reject sent for it,
// or a delivery count that reached the limit. The leader crashes once,
// right after it gave a record again (delivery count 2 or more) in a
// ShareFetch without acknowledgements (none of whose writes would carry
// the expiry), and comes back 200 ms later: the next leader must go on
// from the delivery counts given, (d).
func (w *realWorld) checkShareSettled() {
	if !w.shr.on || w.failed != "" {
		return
	}
	key := w.shareKey()
	drained, hung := false, false
	var hw int64
	var epoch int32
	w.shr.draining = true
	var crashed *realBroker
	restartAt := -1
	for i := 0; i < 4000 && w.failed == "" && !drained; i++ {
		if id := w.shr.crashLeader; id > 0 && crashed == nil {
			if rb := w.brokers[id-1]; rb.up && !w.shareBusy(id) {
				w.tracef("share leader %d crashes right after giving a record again", id)
				w.crash(rb)
				crashed, restartAt = rb, i+40
			}
		}
		if i == restartAt {
			w.startBroker(crashed)
		}
		w.control(0)
		w.healthyRound(nil)
		if i < 60 {
			w.produce() // records to drain (a quarter of them to realShareTopic)
		}
		w.txnStep(false)
		w.collect()
		w.collectTxn()
		w.drainShareCoords()
		w.shareCalls()
		w.shareReleases()
		w.shareExpiry()
		for _, m := range append([]*shareMember(nil), w.shr.members...) {
			w.shareHeartbeat(m)
			if !hung && !m.busy && len(m.held) > 0 {
				// One member hangs holding records: only the
				// expiry of its locks lets the others drain.
				hung = true
				w.tracef("share member %s hangs while draining, holding %d records", m.name, len(m.held))
				w.shareRemove(m)
				w.newShareMember()
				continue
			}
			if !m.busy && m.epoch > 0 && w.chance(0.5) {
				w.shareFetch(m, true)
			}
		}
		if len(w.shr.reqs) > 0 || i%10 != 0 || i < 100 {
			continue
		}
		leader := w.ctrl.image().Topics[realShareTopic].Partitions[0].Leader
		if leader < 1 || !w.brokers[leader-1].up {
			continue
		}
		lp, err := w.brokers[leader-1].b.PartitionBy(realShareTopic, 0, time.Time{})
		sp := w.brokers[leader-1].h.SharePartitions().Held(key)
		if err != nil || sp == nil || !lp.IsLeader() {
			continue
		}
		start, _ := sp.Offsets()
		hw, epoch = lp.HighWatermark(), lp.LeaderEpoch()
		drained = start == hw
	}
	if w.failed != "" {
		return
	}
	if !drained {
		w.fail("(c) after settling, the share group's members did not drain %s-0 (high watermark %d): %s", realShareTopic, hw, w.shareWindow())
		return
	}
	st, err := w.shareDurable(key, epoch)
	if err != nil {
		w.fail("(c) reading the durable share state after settling: %v", err)
		return
	}
	leader := w.ctrl.image().Topics[realShareTopic].Partitions[0].Leader
	lp, err := w.brokers[leader-1].b.PartitionBy(realShareTopic, 0, time.Time{})
	if err != nil {
		w.fail("(c) %s-0 on its leader %d: %v", realShareTopic, leader, err)
		return
	}
	data := map[int64]bool{} // the offsets holding a record: the others hold markers
	if err := readRecords(lp.Log(), hw, func(off int64, _ []byte) bool {
		data[off] = true
		return true
	}); err != nil {
		w.fail("(c) reading %s-0 on its leader: %v", realShareTopic, err)
		return
	}
	for o := int64(0); o < hw; o++ {
		if !data[o] {
			continue
		}
		if !shareDone(st, o) {
			w.fail("(c) after draining to %d, %s-0@%d is not acknowledged or archived in the durable share state (start %d, batches %v)",
				hw, realShareTopic, o, st.StartOffset, st.Batches)
			return
		}
		rec := w.shr.recs[o]
		if rec == nil || !rec.accepted && !rec.rejected && rec.maxCount < realShareLimit {
			w.fail("(c) %s-0@%d is acknowledged or archived (below the durable start offset %d) with no accept or reject sent for it and its delivery count never at the limit (seen %d)",
				realShareTopic, o, st.StartOffset, func() int16 {
					if rec == nil {
						return 0
					}
					return rec.maxCount
				}())
			return
		}
	}
}

// shareWindow describes the leader's share partition.
func (w *realWorld) shareWindow() string {
	leader := w.ctrl.image().Topics[realShareTopic].Partitions[0].Leader
	if leader < 1 || !w.brokers[leader-1].up || len(w.shr.reqs) > 0 {
		return "no leader"
	}
	sp := w.brokers[leader-1].h.SharePartitions().Held(w.shareKey())
	if sp == nil {
		return "no share partition on the leader"
	}
	start, end := sp.Offsets()
	out := "window " + itoa(start) + "-" + itoa(end) + ":"
	for i, r := range sp.Window(w.clk.Now()) {
		if i >= 20 {
			out += " ..."
			break
		}
		out += " " + itoa(r.Offset) + "/" + itoa(int64(r.State)) + "/" + itoa(int64(r.DeliveryCount))
	}
	return out
}

// shareDurable reads key's committed state from its coordinator, as
// the leader of leaderEpoch.
func (w *realWorld) shareDurable(key share.Key, leaderEpoch int32) (share.State, error) {
	c := &shareCall{from: 1, kind: shareCallRead, key: key, epoch: leaderEpoch,
		deadline: w.clk.Now().Add(10 * time.Second), backoff: 50 * time.Millisecond}
	for i := 0; i < 2000 && !c.answered; i++ {
		if !c.sent && !w.clk.Now().Before(c.retryAt) {
			w.shareSend(c)
		}
		w.clk.Advance(5 * time.Millisecond)
		for _, rb := range w.upBrokers() {
			rb.b.StepFetch()
			rb.b.StepFlush()
			rb.b.StepTick()
		}
		w.drainShareCoords()
	}
	if !c.answered {
		return share.State{}, kerr.RequestTimedOut
	}
	return c.ans.st, c.ans.err
}

// shareDone reports whether offset o is acknowledged or archived in st.
func shareDone(st share.State, o int64) bool {
	if o < st.StartOffset {
		return true
	}
	for _, b := range st.Batches {
		if b.FirstOffset <= o && o <= b.LastOffset {
			return b.DeliveryState == share.StateAcknowledged || b.DeliveryState == share.StateArchived
		}
	}
	return false
}

// shareName is member id's name in the trace.
func (w *realWorld) shareName(id string) string {
	for _, m := range w.shr.members {
		if m.id == id {
			return m.name
		}
	}
	return id
}
