package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluice-io/sluice/internal/vfs"
)

// Eligible leader replicas (KIP-966) in the real-broker world: the
// controller machine keeps them (a new cluster's
// eligible.leader.replicas.version is 1); the world adds a fault that
// makes them matter, a disk wiped while its broker is down, and checks:
//
//   - checkElected: a broker that starts leading a partition in the
//     controller's current leader epoch holds every record below the
//     highest HW any client saw, and each record a consumer read there at
//     its offset;
//   - checkELR: every live ELR member's log reaches that HW;
//   - checkClean: no election is unclean (unclean.leader.election.enable
//     is false on every topic here): no partition is ever recovering.
//
// A wiped broker restarts with an empty file system, no replayed
// metadata and no recorded broker epoch, so its registration is unclean
// and takes it out of every ELR. A wipe never destroys the last copy of a
// committed record: the broker must be out of every ISR (the controller
// would count a stale member's lost copy until it registers), there must
// be another member in the ISR or ELR of every partition (the protocol
// keeps them holding every committed record), and no other wiped broker
// may be catching up.

// realWipeSeeds: one seed in realWipeSeeds (those divisible by it) wipes
// disks, the others keep the traces they had before the fault existed
// (and the first failing seeds of TestRealOldBugsAreCaught with them);
// realWipeP is the chance that a restart of such a seed first wipes the
// broker's disk.
const (
	realWipeSeeds = 4
	realWipeP     = 0.25
)

// elrState is the ELR side of a realWorld.
type elrState struct {
	// rng draws the wipes apart from the world's PRNG, so that seeds
	// without a wipe keep their traces; nil in a seed without wipes.
	rng *rand.Rand
	// seenHW is the highest HW a consumer was answered with, per topic.
	seenHW map[string]int64
	// wiped holds brokers wiped and not yet back in every ISR, with the
	// topics whose ISR they rejoined since their first registration
	// after the wipe: a missing copy is not counted against
	// checkDurable.
	wiped map[int32]map[string]bool
	// dirs counts disks, for directory ids.
	dirs int
}

func newELRState(seed uint64) elrState {
	st := elrState{seenHW: map[string]int64{}, wiped: map[int32]map[string]bool{}}
	if seed%realWipeSeeds == 0 {
		st.rng = rand.New(rand.NewPCG(seed^0x2545f4914f6cdd1d, seed))
	}
	return st
}

// newDir names a fresh disk.
func (w *realWorld) newDir() string {
	w.elr.dirs++
	return fmt.Sprintf("dir-%d", w.elr.dirs)
}

// maybeWipe wipes down broker rb's disk before its restart, if a draw
// says so and no committed record would be lost with it.
func (w *realWorld) maybeWipe(rb *realBroker) {
	if rb.up || w.elr.rng == nil || w.elr.rng.Float64() >= realWipeP || len(w.elr.wiped) > 0 {
		return
	}
	im := w.ctrl.image()
	for _, topic := range append(w.coordTopics(), w.topics...) {
		p := im.Topics[topic].Partitions[0]
		if slices.Contains(p.ISR, rb.id) || !slices.ContainsFunc(append(slices.Clone(p.ISR), p.ELR...), func(id int32) bool { return id != rb.id }) {
			return
		}
	}
	rb.fs = vfs.NewMem()
	rb.last = nil
	rb.diskEpoch = -1
	rb.dir = w.newDir()
	rb.flushed = map[string]int64{}
	w.elr.wiped[rb.id] = map[string]bool{}
	w.stats.Wipes++
	w.tracef("broker %d's disk wiped (%s)", rb.id, rb.dir)
}

// noteWiped notes the topics whose ISR a wiped broker rejoined (once its
// registration after the wipe, which took it out of every ISR, is
// committed) and forgets it once it is back in every one.
func (w *realWorld) noteWiped() {
	im := w.ctrl.image()
	for id, back := range w.elr.wiped {
		if w.brokers[id-1].diskEpoch < 0 {
			continue // not registered since the wipe
		}
		for _, topic := range w.topics {
			if has32(im.Topics[topic].Partitions[0].ISR, id) {
				back[topic] = true
			}
		}
		if len(back) == len(w.topics) {
			delete(w.elr.wiped, id)
		}
	}
}

// wipedMissing counts wiped brokers not yet back in topic's ISR.
func (w *realWorld) wipedMissing(topic string) int {
	w.noteWiped()
	n := 0
	for _, back := range w.elr.wiped {
		if !back[topic] {
			n++
		}
	}
	return n
}

func has32(s []int32, x int32) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// checkElected runs when broker id is first seen leading topic in a
// leader epoch: it must hold every record below the highest HW a client
// saw, and what consumers read there.
func (w *realWorld) checkElected(rb *realBroker, topic string, leo int64, epoch int32) {
	seen := w.elr.seenHW[topic]
	if leo < seen {
		w.fail("broker %d leads %s-0 in epoch %d with log end %d, below the HW %d a client saw: %s", rb.id, topic, epoch, leo, seen, w.describe(topic))
		return
	}
	if topic == realCompactTopic {
		return // checkCompacted
	}
	p, err := rb.b.PartitionBy(topic, 0, time.Time{})
	if err != nil {
		return
	}
	l := p.Log()
	got := map[int64]string{}
	if err := readRecords(l, seen, func(off int64, value []byte) bool {
		got[off] = string(value)
		return true
	}); err != nil {
		w.fail("broker %d: reading %s-0: %v", rb.id, topic, err)
		return
	}
	for off, v := range w.consumed[topic] {
		if off < seen && off >= l.LocalLogStartOffset() && off >= w.deleted[topic] && got[off] != v {
			w.fail("broker %d leads %s-0 in epoch %d holding %q at %d, where a consumer read %q below HW %d: %s",
				rb.id, topic, epoch, got[off], off, v, seen, w.describe(topic))
			return
		}
	}
}

// checkELR: every live, registered ELR member holds the log up to the
// highest HW a client saw (it left the ISR while the HW was frozen).
func (w *realWorld) checkELR() {
	im := w.ctrl.image()
	for _, topic := range w.topics {
		part := im.Topics[topic].Partitions[0]
		if part.Recovering {
			w.fail("%s-0 is recovering (an unclean election) with unclean.leader.election.enable=false: %s", topic, w.describe(topic))
			return
		}
		for _, id := range part.ELR {
			rb := w.brokers[id-1]
			if !rb.up || rb.pendingReg != nil {
				continue
			}
			p, err := rb.b.PartitionBy(topic, 0, time.Time{})
			if err != nil {
				continue
			}
			if leo, seen := p.Log().LogEndOffset(), w.elr.seenHW[topic]; leo < seen {
				w.fail("broker %d is in the ELR %v of %s-0 with log end %d, below the HW %d a client saw: %s", id, part.ELR, topic, leo, seen, w.describe(topic))
				return
			}
		}
	}
	w.noteWiped()
}
