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
	epoch  int64 // 0: never registered
	fenced bool
	lastHB int64
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
	ep := b.epoch
	w.net.send(controllerID, id, func() { w.brokers[id-1].registered(ep) })
	c.electLeaderless()
	c.publish()
}

func (c *controller) heartbeat(id int32, ep int64) {
	w := c.w
	b := &c.brokers[id-1]
	if ep != b.epoch {
		return
	}
	b.lastHB = w.now
	if b.fenced {
		b.fenced = false
		w.tracef("controller: broker %d unfenced", id)
		c.electLeaderless()
		c.publish()
		return
	}
	states := c.states()
	w.net.send(controllerID, id, func() { w.brokers[id-1].applyMetadata(states) })
}

// fence removes a broker from every ISR (never emptying one, §4.1) and
// re-elects the partitions it led.
func (c *controller) fence(id int32) {
	c.brokers[id-1].fenced = true
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
	c.publish()
}

func (c *controller) eligible(id int32) bool {
	b := c.brokers[id-1]
	return b.epoch != 0 && !b.fenced
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

// publish pushes the current metadata to every registered broker.
func (c *controller) publish() {
	w := c.w
	states := c.states()
	for i := range c.brokers {
		if c.brokers[i].epoch != 0 {
			id := int32(i + 1)
			w.net.send(controllerID, id, func() { w.brokers[id-1].applyMetadata(states) })
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
			if id != cp.leader && (!c.eligible(id) || req.BrokerEpochs[i] != c.brokers[id-1].epoch) {
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
