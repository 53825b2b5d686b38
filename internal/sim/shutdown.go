package sim

import (
	"slices"

	"github.com/sluice-io/sluice/internal/replica"
)

// Controlled shutdown (reference §4.3; Kafka's BrokerHeartbeat with
// WantShutDown and ReplicationControlManager): the broker heartbeats with
// wantDown; the controller marks it shutting down (ineligible), takes it
// out of every ISR and re-elects the partitions it led, in one metadata
// entry; it grants the shutdown once the broker leads nothing and every
// other active broker has applied that entry (sluice 1cf2b54; Kafka's
// BrokerHeartbeatManager). The broker then flushes everything and stops;
// it restarts later and registers a new incarnation.

// shutdown commits broker id's controlled shutdown.
func (c *controller) shutdown(id int32) {
	w := c.w
	b := &c.brokers[id-1]
	b.shuttingDown = true
	w.tracef("controller: controlled shutdown of broker %d", id)
	c.removeBroker(id)
	c.publish()
	b.shutdownAt = c.offset
}

// maybeGrantShutdown answers a heartbeat that asks to shut down.
func (c *controller) maybeGrantShutdown(id int32) {
	w := c.w
	b := &c.brokers[id-1]
	handoff := b.shuttingDown && !b.fenced && !c.leadsAny(id) && (w.opts.bugs.earlyShutdownGrant || c.othersApplied(id))
	if !handoff && !b.fenced {
		return
	}
	// A fenced broker is granted at once: it was out of every ISR already,
	// and brokers cut off with it may not know; only a granted controlled
	// shutdown promises the hand-off, to the brokers active now.
	var active []int32
	for i := range c.brokers {
		if handoff && int32(i+1) != id && c.eligible(int32(i+1)) {
			active = append(active, int32(i+1))
		}
	}
	ep, im := b.epoch, c.image()
	w.net.send(controllerID, id, func() { w.brokers[id-1].shutdownGranted(ep, im, active) })
}

func (c *controller) leadsAny(id int32) bool {
	for p := range c.parts {
		if c.parts[p].leader == id {
			return true
		}
	}
	return false
}

// othersApplied reports whether every other active broker has applied the
// metadata up to id's controlled-shutdown entry.
func (c *controller) othersApplied(id int32) bool {
	at := c.brokers[id-1].shutdownAt
	for i := range c.brokers {
		if int32(i+1) != id && c.eligible(int32(i+1)) && c.brokers[i].applied < at {
			return false
		}
	}
	return true
}

// beginShutdown is the nemesis's SIGTERM: the broker asks to shut down on
// its next heartbeats.
func (b *broker) beginShutdown() {
	b.wantDown = true
	b.w.stats.Shutdowns++
	b.w.tracef("SIGTERM broker %d (controlled shutdown)", b.id)
}

// shutdownGranted: the controller allowed this broker to stop. It applies
// the controller's image, flushes every log, and stops; it restarts later.
func (b *broker) shutdownGranted(ep int64, im *image, active []int32) {
	w := b.w
	if !b.alive || !b.wantDown || b.epoch != ep {
		return
	}
	b.receiveMetadata(im)
	w.check.handoff(b, active)
	for _, bp := range b.parts {
		if bp == nil {
			continue
		}
		d := bp.disk
		d.flushedN = len(d.batches)
		if bp.r != nil {
			d.hw = bp.r.HW()
		}
		bp.r = nil
	}
	b.alive = false
	w.tracef("STOP broker %d (controlled shutdown granted)", b.id)
	inc := b.incarnation
	w.at(50+int64(w.intn(550)), func() {
		if !b.alive && b.incarnation == inc {
			b.restart()
		}
	})
}

// handoff is the controlled-shutdown invariant, checked when broker x
// stops: no live broker that the controller counted as active when it
// granted the shutdown still follows x or, as a leader, counts x in its
// ISR. (A shutdown that breaks it leaves partitions without a working
// leader, or leaders waiting on a stopped ISR member, until the survivors
// catch up: what controlled shutdown exists to avoid.)
func (c *checker) handoff(x *broker, active []int32) {
	w := c.w
	for _, id := range active {
		y := w.brokers[id-1]
		if !y.alive || !y.caughtUp {
			continue
		}
		for _, bp := range y.parts {
			if bp == nil || bp.r == nil {
				continue
			}
			r := bp.r
			name := w.topics[bp.p].name
			switch {
			case r.Role() == replica.RoleFollower && r.Leader() == x.id:
				w.fail("%s@%d still follows broker %d (epoch %d) when its controlled shutdown completes", name, y.id, x.id, r.LeaderEpoch())
				return
			case r.Role() == replica.RoleLeader && slices.Contains(r.ISR(), x.id):
				w.fail("%s@%d leads with isr %v including broker %d when its controlled shutdown completes", name, y.id, r.ISR(), x.id)
				return
			}
		}
	}
}
