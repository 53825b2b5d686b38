package sim

import (
	"encoding/binary"

	"github.com/sluice-io/sluice/internal/replica"
)

// recKey identifies a produced record: producer id, producer epoch, sequence.
type recKey struct {
	pid    int64
	pepoch int16
	seq    int32
}

// crec is one committed record.
type crec struct {
	epoch int32
	id    uint64
	key   recKey
}

type ckey struct {
	broker int32
	part   int
}

// repState is what the checker remembers about one replica incarnation.
type repState struct {
	checked     int64 // disk prefix verified equal to the committed log
	lastEpoch   int32
	leaderEpoch int32 // epoch of the last leader HW seen, -1 none
	leaderHW    int64
}

// leaderInc is one broker incarnation.
type leaderInc struct {
	id  int32
	inc int
}

type partCheck struct {
	committed []crec              // the committed log: every record any HW covered
	keys      map[recKey]int64    // record identity -> offset in committed
	lossy     bool                // an unclean election happened: loss is allowed
	leaderOf  map[int32]leaderInc // leader epoch -> broker incarnation
}

// checker holds the invariants, checked after every step (see package doc
// and docs/replication.md):
//
//  1. acks=all acknowledged records are committed and stay at their offset on
//     every later leader (the committed log only grows; every new leader
//     holds all of it; no replica truncates into it);
//  2. consumers only receive committed records, densely and in order;
//  3. below the leader's HW, every ISR member holds the committed bytes;
//  4. a leader's HW never goes back within an epoch; one leader per epoch;
//     a replica's leader epoch never goes back;
//  5. no record (producer id, epoch, sequence) is committed twice, and an
//     acknowledgement (also a duplicate's) points at that very record;
//  6. Durability (docs/architecture.md): committed records are flushed on at least
//     min(min.insync.replicas, RF) replicas;
//  7. a controlled shutdown hands off: when the broker stops, no active
//     broker still follows it or counts it in an ISR (shutdown.go);
//  8. liveness, at the end: after healing, every partition has a leader
//     and its whole replica set in the ISR.
//
// Partitions where an unclean election happened keep only the checks of 4.
type checker struct {
	w     *world
	parts []partCheck
	reps  map[ckey]*repState
}

func newChecker(w *world) *checker {
	c := &checker{w: w, reps: map[ckey]*repState{}}
	for range w.topics {
		c.parts = append(c.parts, partCheck{keys: map[recKey]int64{}, leaderOf: map[int32]leaderInc{}})
	}
	return c
}

func (c *checker) rep(b int32, p int) *repState {
	k := ckey{b, p}
	s := c.reps[k]
	if s == nil {
		s = &repState{leaderEpoch: -1, lastEpoch: -1}
		c.reps[k] = s
	}
	return s
}

// started: a replica incarnation was created from its disk.
func (c *checker) started(b int32, p int, r *replica.Replica) {
	s := c.rep(b, p)
	s.lastEpoch, s.leaderEpoch = -1, -1
	s.checked = min(s.checked, r.LEO())
}

func (c *checker) crashed(b int32, p int, leo int64) {
	s := c.rep(b, p)
	s.checked = min(s.checked, leo)
}

// truncated: the driver is about to cut b's log of p to offset.
func (c *checker) truncated(b int32, p int, offset int64) {
	s := c.rep(b, p)
	if offset < s.checked && !c.parts[p].lossy {
		c.w.fail("%s@%d truncates to %d, below committed offset %d it held", c.w.topics[p].name, b, offset, s.checked)
	}
	s.checked = min(s.checked, offset)
}

// uncleanElection: leader was elected from outside the ISR. Committed
// records it lacks are lost (counted, not a violation: the topic allowed
// it), and the partition's loss checks stop.
func (c *checker) uncleanElection(p int, leader int32) {
	pc := &c.parts[p]
	if pc.lossy {
		return
	}
	d := c.w.brokers[leader-1].parts[p].disk
	n := int64(0)
	for n < int64(len(pc.committed)) && c.matches(leader, p, d, n+1) {
		n++
	}
	c.w.stats.LostCommittedUnclean += len(pc.committed) - int(n)
	pc.lossy = true
	c.w.tracef("checker: %s unclean election of %d loses %d committed records; loss checks off for it",
		c.w.topics[p].name, leader, len(pc.committed)-int(n))
}

func recordID(b *replica.Batch, i int) uint64 {
	return binary.LittleEndian.Uint64(b.Data[8*i:])
}

// verify checks b's disk against the committed log up to upTo and fails the
// run on a difference; extend lets a leader's HW grow the committed log.
func (c *checker) verify(b int32, p int, d *disk, upTo int64, extend bool) bool {
	return c.compare(b, p, d, upTo, extend, true)
}

// matches is verify without failing: it reports whether b's disk holds the
// committed log up to upTo.
func (c *checker) matches(b int32, p int, d *disk, upTo int64) bool {
	return c.compare(b, p, d, upTo, false, false)
}

func (c *checker) compare(b int32, p int, d *disk, upTo int64, extend, report bool) bool {
	w := c.w
	pc := &c.parts[p]
	s := c.rep(b, p)
	if upTo <= s.checked || pc.lossy {
		return true
	}
	if d.leo() < upTo {
		if !report {
			return false
		}
		w.fail("%s@%d holds only up to %d, below committed offset %d", w.topics[p].name, b, d.leo(), upTo)
		return false
	}
	i := d.find(s.checked)
	if i == len(d.batches) || d.batches[i].BaseOffset > s.checked {
		i--
	}
	for ; i < len(d.batches) && d.batches[i].BaseOffset < upTo; i++ {
		x := &d.batches[i]
		for k := int32(0); k < x.NumRecords; k++ {
			o := x.BaseOffset + int64(k)
			if o < s.checked || o >= upTo {
				continue
			}
			rec := crec{epoch: x.Epoch, id: recordID(x, int(k)), key: recKey{x.ProducerID, x.ProducerEpoch, x.BaseSeq + k}}
			switch {
			case o < int64(len(pc.committed)):
				if pc.committed[o] != rec {
					if !report {
						return false
					}
					w.fail("%s@%d offset %d holds %+v, but %+v was committed there", w.topics[p].name, b, o, rec, pc.committed[o])
					return false
				}
			case !extend:
				if !report {
					return false
				}
				w.fail("%s@%d has offset %d below its HW, but it was never committed", w.topics[p].name, b, o)
				return false
			default:
				if prev, dup := pc.keys[rec.key]; dup {
					w.fail("%s: record %+v committed twice, at %d and %d", w.topics[p].name, rec.key, prev, o)
					return false
				}
				pc.keys[rec.key] = o
				pc.committed = append(pc.committed, rec)
			}
		}
	}
	s.checked = upTo
	return true
}

// step runs the per-step invariants over every live replica.
func (c *checker) step() {
	w := c.w
	for _, b := range w.brokers {
		if !b.alive {
			continue
		}
		for _, bp := range b.parts {
			if bp == nil || bp.r == nil || w.failed != "" {
				continue
			}
			c.stepReplica(b, bp)
		}
	}
}

func (c *checker) stepReplica(b *broker, bp *bpart) {
	w := c.w
	r, p := bp.r, bp.p
	pc := &c.parts[p]
	s := c.rep(b.id, p)
	name := w.topics[p].name
	if r.LeaderEpoch() < s.lastEpoch {
		w.fail("%s@%d leader epoch went back from %d to %d", name, b.id, s.lastEpoch, r.LeaderEpoch())
		return
	}
	s.lastEpoch = r.LeaderEpoch()
	if r.Role() != replica.RoleLeader {
		c.verify(b.id, p, bp.disk, r.HW(), false) // KAFKA-14704: nothing uncommitted below a follower's HW
		return
	}
	le := r.LeaderEpoch()
	me := leaderInc{b.id, b.incarnation}
	if other, ok := pc.leaderOf[le]; ok && other != me {
		// A restarted broker is a new process: leading an epoch its
		// previous incarnation led is a second leader, with another log.
		w.fail("%s: two leaders in epoch %d: broker %d (incarnation %d) and broker %d (incarnation %d)",
			name, le, other.id, other.inc, me.id, me.inc)
		return
	}
	if _, ok := pc.leaderOf[le]; !ok {
		pc.leaderOf[le] = me
		// A new leader must hold the whole committed log.
		if !c.verify(b.id, p, bp.disk, int64(len(pc.committed)), false) {
			return
		}
	}
	if s.leaderEpoch == le && r.HW() < s.leaderHW {
		w.fail("%s@%d HW went back from %d to %d in epoch %d", name, b.id, s.leaderHW, r.HW(), le)
		return
	}
	s.leaderEpoch, s.leaderHW = le, r.HW()
	hw := r.HW()
	if !c.verify(b.id, p, bp.disk, hw, true) || pc.lossy {
		return
	}
	// Every ISR member (up or down) holds the committed bytes below the HW.
	for _, id := range r.ISR() {
		if id == b.id {
			continue
		}
		if op := w.brokers[id-1].parts[p]; op != nil && !c.verify(id, p, op.disk, hw, false) {
			return
		}
	}
	// the durability rule: committed means flushed on at least min ISR replicas.
	need := min(w.topics[p].minISR, len(w.topics[p].replicas))
	have := 0
	for _, id := range w.topics[p].replicas {
		d := w.brokers[id-1].parts[p].disk
		if d.flushedLEO() >= hw && c.matches(id, p, d, hw) {
			have++
		}
	}
	if have < need {
		w.fail("%s@%d: HW %d is flushed on only %d replicas, min.insync.replicas=%d", name, b.id, hw, have, need)
	}
}

// ackLeaves checks a successful produce answer as the leader sends it: the
// offsets hold this very batch (so a duplicate answer is never a lie).
func (c *checker) ackLeaves(b *broker, bp *bpart, pid int64, pb *pbatch, res replica.ProduceResult) {
	w := c.w
	d := bp.disk
	i := d.find(res.BaseOffset)
	if i == len(d.batches) || d.batches[i].BaseOffset != res.BaseOffset || d.batches[i].LastOffset() != res.LastOffset {
		w.fail("%s@%d acknowledged [%d, %d] but holds no such batch", w.topics[bp.p].name, b.id, res.BaseOffset, res.LastOffset)
		return
	}
	x := &d.batches[i]
	if x.ProducerID != pid || x.ProducerEpoch != pb.pepoch || x.BaseSeq != pb.seq || recordID(x, 0) != pb.ids[0] {
		w.fail("%s@%d acknowledged producer %d epoch %d seq %d at %d, which holds producer %d epoch %d seq %d",
			w.topics[bp.p].name, b.id, pid, pb.pepoch, pb.seq, res.BaseOffset, x.ProducerID, x.ProducerEpoch, x.BaseSeq)
	}
}

// ackedAll: a producer received an acks=all success. The batch must be in
// the committed log at the acknowledged offsets.
func (c *checker) ackedAll(p int, pid int64, pb *pbatch, res replica.ProduceResult) {
	w := c.w
	pc := &c.parts[p]
	if pc.lossy {
		return
	}
	for k := range pb.ids {
		o := res.BaseOffset + int64(k)
		if o >= int64(len(pc.committed)) {
			w.fail("%s: acks=all acknowledged offset %d, not committed (committed log ends at %d)", w.topics[p].name, o, len(pc.committed))
			return
		}
		want := crec{epoch: pc.committed[o].epoch, id: pb.ids[k], key: recKey{pid, pb.pepoch, pb.seq + int32(k)}}
		if pc.committed[o] != want {
			w.fail("%s: acks=all acknowledged %+v at %d, but %+v is committed there", w.topics[p].name, want, o, pc.committed[o])
			return
		}
	}
}

// consumed: a consumer received b. It must be committed.
func (c *checker) consumed(p int, b *replica.Batch) {
	w := c.w
	pc := &c.parts[p]
	if pc.lossy {
		return
	}
	for k := int32(0); k < b.NumRecords; k++ {
		o := b.BaseOffset + int64(k)
		if o >= int64(len(pc.committed)) || pc.committed[o].id != recordID(b, int(k)) {
			w.fail("%s: consumer received offset %d (record %d), which is not committed", w.topics[p].name, o, recordID(b, int(k)))
			return
		}
	}
}

func (c *checker) consumerOutOfRange(p int, pos int64, res replica.FetchResult) {
	if !c.parts[p].lossy {
		c.w.fail("%s: consumer at committed position %d got OFFSET_OUT_OF_RANGE (leader LEO %d)", c.w.topics[p].name, pos, res.LEO)
	}
}

// settled is the end-of-run liveness check: once every fault has healed
// and the cluster has run settleMs, every partition has a leader and its
// whole replica set back in the ISR (a caught-up follower is re-added at
// once, §2.3).
func (c *checker) settled() {
	w := c.w
	for p := range w.topics {
		cp := &w.ctrl.parts[p]
		if cp.leader < 0 || len(cp.isr) != len(w.topics[p].replicas) {
			w.fail("liveness: %s has leader %d and isr %v (replicas %v) %d ms after healing",
				w.topics[p].name, cp.leader, cp.isr, w.topics[p].replicas, settleMs)
			return
		}
	}
}
