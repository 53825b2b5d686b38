package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// appendRecords writes recs as one batch to s's partition (s.mu held) and
// returns the log offset of the first record and the offset that must
// become durable. It does not wait for durability.
func (c *Coordinator) appendRecords(s *shard, recs []record) (first, end int64, err error) {
	info, err := s.p.Append(encodeBatch(recs, c.clock.Now()), c.clock.Now())
	if err != nil {
		c.log.Error("appending to "+OffsetsTopic, "partition", s.index, "err", err)
		return 0, 0, err
	}
	return info.FirstOffset, info.LastOffset + 1, nil
}

// afterOp runs after every state-machine call on g (s.mu held): it writes
// the group records g asked for and re-arms g's timer.
func (c *Coordinator) afterOp(s *shard, g *Group) {
	for {
		ops := g.drainStores()
		if len(ops) == 0 {
			break
		}
		for _, op := range ops {
			_, end, err := c.appendRecords(s, []record{op.rec})
			switch {
			case op.then == nil:
				// Flushed and replicated in the background by the partition.
			case err != nil:
				op.then(c.clock.Now(), err)
			default:
				c.whenDurable(s, g, end, op.then)
			}
		}
	}
	c.schedule(s, g)
}

// whenDurable runs then (under s.mu) once offsets below end are durable.
func (c *Coordinator) whenDurable(s *shard, g *Group, end int64, then func(time.Time, error)) {
	p := s.p
	go func() {
		err := p.Commit(end)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gone {
			err = kerr.NotCoordinator
		}
		then(c.clock.Now(), err)
		if !s.gone {
			c.afterOp(s, g)
		}
	}()
}

// schedule arms g's timer for its next deadline (s.mu held). A timer armed
// earlier than needed is left alone: it fires, finds nothing to do, and
// re-arms, which is cheaper than re-arming on every heartbeat.
func (c *Coordinator) schedule(s *shard, g *Group) {
	if s.gone || s.groups[g.id] != g {
		return
	}
	at := g.NextDeadline()
	t := s.timers[g.id]
	if at.IsZero() {
		if t != nil {
			t.stop()
			delete(s.timers, g.id)
		}
		return
	}
	if t != nil && !at.Before(t.at) {
		return
	}
	if t != nil {
		t.stop()
	}
	nt := &groupTimer{at: at}
	s.timers[g.id] = nt
	nt.stop = c.clock.AfterFunc(at.Sub(c.clock.Now()), func() { c.fire(s, g, nt) }).Stop
}

// fire is a group timer going off.
func (c *Coordinator) fire(s *shard, g *Group, t *groupTimer) {
	c.mu.Lock()
	if !c.owns(s) {
		c.resignLocked(s.index)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timers[g.id] != t {
		return
	}
	delete(s.timers, g.id)
	if s.groups[g.id] != g {
		return
	}
	g.Tick(c.clock.Now())
	c.afterOp(s, g)
}

// armRetentionLocked starts the periodic offset expiry (c.mu held).
func (c *Coordinator) armRetentionLocked() {
	if c.retentionStop != nil || c.closed {
		return
	}
	c.retentionStop = c.clock.AfterFunc(c.cfg.RetentionCheckInterval, c.expireOffsets).Stop
}

// expireOffsets applies offsets.retention.minutes to every group, removes
// empty groups left without offsets, and re-arms itself while the
// coordinator serves any partition.
func (c *Coordinator) expireOffsets() {
	c.reconcile()
	c.mu.Lock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.retentionStop = nil
	if len(c.shards) > 0 {
		c.armRetentionLocked()
	}
	c.mu.Unlock()
	for _, s := range shards {
		c.expireShard(s)
	}
}

// ExpireNow runs the offset expiry at once (tests and tools).
func (c *Coordinator) ExpireNow() {
	c.mu.Lock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	for _, s := range shards {
		c.expireShard(s)
	}
}

func (c *Coordinator) expireShard(s *shard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone || s.loading {
		return
	}
	now := c.clock.Now()
	var recs []record
	type del struct {
		g  *Group
		tp TopicPartition
		i  int
	}
	var dels []del
	var drop []*Group
	for _, g := range s.groups {
		for _, tp := range g.expiredOffsets(now, c.cfg.OffsetsRetention) {
			dels = append(dels, del{g, tp, len(recs)})
			recs = append(recs, offsetTombstone(g.id, tp))
		}
		if g.state == Empty && len(g.pending) == 0 && len(g.offsets) == len(g.expiredOffsets(now, c.cfg.OffsetsRetention)) &&
			len(g.pendingCommits) == 0 && g.numTxnOffsets() == 0 {
			drop = append(drop, g)
			recs = append(recs, groupTombstone(g.id))
		}
	}
	if len(recs) == 0 {
		return
	}
	first, _, err := c.appendRecords(s, recs)
	if err != nil {
		return
	}
	for _, d := range dels {
		d.g.deleteOffset(d.tp, first+int64(d.i))
	}
	for _, g := range drop {
		c.removeGroup(s, g)
	}
	if len(dels) > 0 {
		c.log.Info("expired offsets", "partition", s.index, "offsets", len(dels), "groups", len(drop))
	}
}
