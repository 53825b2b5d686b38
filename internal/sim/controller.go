package sim

import (
	"slices"

	"github.com/sluice-io/sluice/internal/replica"
)

// Timing of the simulated cluster, in ms.
const (
	sessionTimeoutMs = 300 // broker.session.timeout.ms
	lagTimeMs        = 400 // replica.lag.time.max.ms
)

type cbroker struct {
	epoch        int64 // 0: never registered
	fenced       bool
	shuttingDown bool // controlled shutdown in progress (§4.3): not eligible
	lastHB       int64
	applied      int64 // metadata offset from its last heartbeat
	shutdownAt   int64 // offset of the image that committed its controlled shutdown
}

type cpart struct {
	leader int32
	le, pe int32
	isr    []int32
}

// controller is a minimal KRaft-style controller (reference §4.1, §2.4, §6):
// broker registration with fresh broker epochs, session-timeout fencing,
// elections from the ISR in assignment order (outside it only where the topic
// allows unclean election, then ISR = {leader}), and ISR changes committed by
// compare-and-set on (leader epoch, partition epoch). It commits instantly
// and never fails; its messages still cross the simulated network.
type controller struct {
	w         *world
	brokers   []cbroker
	parts     []cpart
	nextEpoch int64
	offset    int64 // metadata log offset: one more per published change
}

// image is one metadata image as brokers receive it: the metadata log
// offset, every broker's registration (broker epoch, 0 none; index id-1)
// and every partition's state. Brokers apply images in offset order, as a
// KRaft broker follows the metadata log.
type image struct {
	offset       int64
	brokerEpochs []int64
	parts        []replica.PartitionState
}

func newController(w *world) *controller {
	c := &controller{w: w, nextEpoch: 100}
	for p := range w.topics {
		c.parts = append(c.parts, cpart{leader: -1, isr: slices.Clone(w.topics[p].replicas)})
	}
	return c
}

func (c *controller) start() {
	c.brokers = make([]cbroker, len(c.w.brokers))
	for i := range c.brokers {
		c.brokers[i].fenced = true
	}
	c.w.at(50, c.tick)
}

func (c *controller) tick() {
	w := c.w
	for i := range c.brokers {
		b := &c.brokers[i]
		if b.epoch != 0 && !b.fenced && w.now-b.lastHB > sessionTimeoutMs {
			w.tracef("controller: session of broker %d expired", i+1)
			c.fence(int32(i + 1))
		}
	}
	w.at(50, c.tick)
}

func (c *controller) register(id int32) {
	w := c.w
	b := &c.brokers[id-1]
	if b.epoch != 0 && !b.fenced {
		c.fence(id) // the old incarnation is gone
	}
	c.nextEpoch++
	b.epoch, b.fenced, b.lastHB = c.nextEpoch, false, w.now
	b.shuttingDown, b.shutdownAt = false, 0
	ep := b.epoch
	w.net.send(controllerID, id, func() { w.brokers[id-1].registered(ep) })
	c.electLeaderless()
	c.publish()
}

// heartbeat is BrokerHeartbeat: it refreshes the session, records the
// broker's applied metadata offset, unfences it, and runs controlled
// shutdown (shutdown.go).
func (c *controller) heartbeat(id int32, ep, applied int64, wantDown bool) {
	w := c.w
	b := &c.brokers[id-1]
	if ep != b.epoch {
		return
	}
	b.lastHB = w.now
	b.applied = max(b.applied, applied)
	switch {
	case wantDown && !b.fenced && !b.shuttingDown:
		c.shutdown(id)
	case b.fenced && !b.shuttingDown && !wantDown:
		b.fenced = false
		w.tracef("controller: broker %d unfenced", id)
		c.electLeaderless()
		c.publish()
	default:
		im := c.image()
		w.net.send(controllerID, id, func() { w.brokers[id-1].receiveMetadata(im) })
	}
	if wantDown {
		c.maybeGrantShutdown(id)
	}
}

// fence removes a broker from every ISR (never emptying one, §4.1) and
// re-elects the partitions it led.
func (c *controller) fence(id int32) {
	c.brokers[id-1].fenced = true
	c.removeBroker(id)
	c.publish()
}

// removeBroker takes an ineligible broker out of every ISR (never emptying
// one, §4.1) and re-elects the partitions it led.
func (c *controller) removeBroker(id int32) {
	for p := range c.parts {
		cp := &c.parts[p]
		if i := slices.Index(cp.isr, id); i >= 0 && len(cp.isr) > 1 {
			cp.isr = slices.Delete(slices.Clone(cp.isr), i, i+1)
			cp.pe++
		}
		if cp.leader == id {
			c.elect(p)
		}
	}
}

func (c *controller) eligible(id int32) bool {
	b := c.brokers[id-1]
	return b.epoch != 0 && !b.fenced && !b.shuttingDown
}

// elect is PartitionChangeBuilder.electLeader's ONLINE election (§4.1).
func (c *controller) elect(p int) {
	w := c.w
	cp := &c.parts[p]
	t := &w.topics[p]
	leader := int32(-1)
	for _, r := range t.replicas {
		if slices.Contains(cp.isr, r) && c.eligible(r) {
			leader = r
			break
		}
	}
	unclean := false
	if leader < 0 && t.unclean {
		for _, r := range t.replicas {
			if c.eligible(r) {
				leader, unclean = r, true
				break
			}
		}
	}
	if leader == cp.leader {
		return
	}
	cp.leader = leader
	cp.le++
	cp.pe++
	if unclean {
		cp.isr = []int32{leader}
		w.stats.UncleanElections++
		w.check.uncleanElection(p, leader)
	}
	if leader >= 0 {
		w.stats.Elections++
	}
	w.tracef("controller: %s leader=%d epoch=%d isr=%v unclean=%v", t.name, leader, cp.le, cp.isr, unclean)
}

func (c *controller) electLeaderless() {
	for p := range c.parts {
		if c.parts[p].leader < 0 {
			c.elect(p)
		}
	}
}

func (c *controller) states() []replica.PartitionState {
	out := make([]replica.PartitionState, len(c.parts))
	for p := range c.parts {
		cp := &c.parts[p]
		t := &c.w.topics[p]
		ps := replica.PartitionState{Leader: cp.leader, LeaderEpoch: cp.le, PartitionEpoch: cp.pe,
			Replicas: t.replicas, ISR: slices.Clone(cp.isr)}
		for _, r := range t.replicas {
			ps.BrokerEpochs = append(ps.BrokerEpochs, c.brokers[r-1].epoch)
			if !c.eligible(r) {
				ps.Ineligible = append(ps.Ineligible, r)
			}
		}
		out[p] = ps
	}
	return out
}

func (c *controller) image() *image {
	im := &image{offset: c.offset, parts: c.states()}
	for i := range c.brokers {
		im.brokerEpochs = append(im.brokerEpochs, c.brokers[i].epoch)
	}
	return im
}

// publish commits the changes made since the last publish as one metadata
// log entry and pushes the new image to every registered broker.
func (c *controller) publish() {
	w := c.w
	c.offset++
	im := c.image()
	for i := range c.brokers {
		if c.brokers[i].epoch != 0 {
			id := int32(i + 1)
			w.net.send(controllerID, id, func() { w.brokers[id-1].receiveMetadata(im) })
		}
	}
}

// alterPartition validates and commits an ISR change
// (validateAlterPartitionData, §2.4) and answers the leader.
func (c *controller) alterPartition(from int32, brokerEpoch int64, p int, req replica.AlterPartitionRequest) {
	w := c.w
	cp := &c.parts[p]
	res := replica.AlterPartitionResult{Seq: req.Seq, LeaderEpoch: cp.le, PartitionEpoch: cp.pe, ISR: slices.Clone(cp.isr)}
	switch {
	case brokerEpoch != c.brokers[from-1].epoch:
		res.Error = replica.ErrFencedLeaderEpoch // stale broker epoch: fenced
	case req.LeaderEpoch > cp.le || req.PartitionEpoch > cp.pe:
		res.Error = replica.ErrNotController
	case req.LeaderEpoch < cp.le:
		res.Error = replica.ErrFencedLeaderEpoch
	case req.Leader != cp.leader:
		res.Error = replica.ErrInvalidRequest
	case req.PartitionEpoch < cp.pe:
		res.Error = replica.ErrInvalidUpdateVersion
	case !slices.Contains(req.NewISR, cp.leader):
		res.Error = replica.ErrInvalidRequest
	default:
		for i, id := range req.NewISR {
			if !slices.Contains(w.topics[p].replicas, id) {
				res.Error = replica.ErrInvalidRequest
				break
			}
			// A broker epoch <= 0 is unknown and not checked (KIP-903; the
			// real controller's validateAlter).
			if id != cp.leader && (!c.eligible(id) || (req.BrokerEpochs[i] > 0 && req.BrokerEpochs[i] != c.brokers[id-1].epoch)) {
				res.Error = replica.ErrIneligibleReplica
				break
			}
		}
	}
	if res.Error == 0 {
		cp.isr = slices.Clone(req.NewISR)
		cp.pe++
		res.PartitionEpoch, res.ISR = cp.pe, slices.Clone(cp.isr)
		w.stats.ISRChanges++
	}
	w.tracef("controller: %s alter isr=%v from %d: error=%d isr=%v pe=%d", w.topics[p].name, req.NewISR, from, res.Error, cp.isr, cp.pe)
	w.net.send(controllerID, from, func() { w.brokers[from-1].alterResult(p, res) })
	if res.Error == 0 {
		c.publish()
	}
}
