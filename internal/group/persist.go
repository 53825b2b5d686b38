package group

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/coord"
	"github.com/sluice-io/sluice/internal/storage"
)

// appendRecords writes recs as one batch to s's partition (owner) through
// the runtime: undo runs if the append or its commit fails, done once it
// is committed or failed (both may be nil). It returns the log offset of
// the first record. The state change of recs was applied at the append
// (deletions, consumer and share groups): reads wait for its commit
// (coord.Shard.Shows, readCommitted).
func (c *Coordinator) appendRecords(s *shard, recs []record, undo func(), done func(error)) (first int64, err error) {
	info, err := c.appendPending(s, recs, undo, done)
	if err == nil {
		s.Shows(info.LastOffset + 1)
	}
	return info.FirstOffset, err
}

// appendPending is appendRecords for a write whose change is applied only
// once committed, in done (offset commits, classic group metadata): reads
// need not wait for it.
func (c *Coordinator) appendPending(s *shard, recs []record, undo func(), done func(error)) (storage.AppendInfo, error) {
	info, err := s.Append(encodeBatch(recs, c.clock.Now()), undo, done)
	if err != nil {
		c.log.Error("appending to "+OffsetsTopic, "partition", s.Partition(), "err", err)
		return storage.AppendInfo{}, err
	}
	return info, nil
}

// afterOp runs after every state-machine call on g (owner): it writes the
// group records g asked for and re-arms g's timer. A record's then runs
// on the owner once it is committed or failed (the group applies its
// metadata only then, so a failure needs no undo).
func (c *Coordinator) afterOp(s *shard, g *Group) {
	for {
		ops := g.drainStores()
		if len(ops) == 0 {
			break
		}
		for _, op := range ops {
			var done func(error)
			if then := op.then; then != nil {
				done = func(err error) {
					if err == coord.ErrNotCoordinator {
						err = kerr.NotCoordinator
					}
					then(c.clock.Now(), err)
					if !s.Gone() {
						c.afterOp(s, g)
					}
				}
			}
			if _, err := c.appendPending(s, []record{op.rec}, nil, done); err != nil && op.then != nil {
				op.then(c.clock.Now(), err)
			}
		}
	}
	c.schedule(s, g)
}

// schedule arms g's timer for its next deadline (owner). A timer armed
// earlier than needed is left alone: it fires, finds nothing to do, and
// re-arms, which is cheaper than re-arming on every heartbeat.
func (c *Coordinator) schedule(s *shard, g *Group) {
	if s.Gone() || s.State().groups[g.id] != g {
		return
	}
	key := groupTimerPrefix + g.id
	at := g.NextDeadline()
	cur, armed := s.TimerAt(key)
	if at.IsZero() {
		if armed {
			s.Cancel(key)
		}
		return
	}
	if armed && !at.Before(cur) {
		return
	}
	s.Schedule(key, at, func(s *shard) { c.fire(s, g) })
}

// fire is a group timer going off (owner).
func (c *Coordinator) fire(s *shard, g *Group) {
	if !c.owns(s.Partition()) {
		s.Unload()
		return
	}
	if s.State().groups[g.id] != g {
		return
	}
	g.Tick(c.clock.Now())
	c.afterOp(s, g)
}

// armRetention arms the shard's periodic offset expiry (owner).
func (c *Coordinator) armRetention(s *shard) {
	s.Schedule(retentionTimer, s.Now().Add(c.cfg.RetentionCheckInterval), func(s *shard) {
		if !c.owns(s.Partition()) {
			s.Unload()
			return
		}
		// Elect partitions led here that have no shard (a missed
		// leadership change), off the owner (inline when stepped: a
		// stepped Resign does not wait).
		if c.stepped {
			c.reconcile()
			c.expireShard(s)
			c.armRetention(s)
			return
		}
		c.work.Add(1)
		go func() {
			defer c.work.Done()
			c.reconcile()
		}()
		c.expireShard(s)
		c.armRetention(s)
	})
}

// ExpireNow runs the offset expiry at once (tests and tools).
func (c *Coordinator) ExpireNow() { c.forEachShard(c.expireShard) }

// expireShard applies offsets.retention.minutes to every group of s and
// removes empty groups left without offsets (owner).
func (c *Coordinator) expireShard(s *shard) {
	now := c.clock.Now()
	var recs []record
	type del struct {
		g  *Group
		tp TopicPartition
		i  int
	}
	var dels []del
	var drop []*Group
	for _, g := range s.State().groups {
		if cg := s.State().consumers.Group(g.id); cg != nil {
			// A consumer group's offsets expire only once it is empty
			// (Kafka's OffsetExpirationCondition), and its holder stays.
			if len(cg.Members) > 0 {
				continue
			}
			for _, tp := range g.expiredOffsets(now, c.cfg.OffsetsRetention) {
				dels = append(dels, del{g, tp, len(recs)})
				recs = append(recs, offsetTombstone(g.id, tp))
			}
			continue
		}
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
	first, err := c.appendRecords(s, recs, nil, nil)
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
		c.log.Info("expired offsets", "partition", s.Partition(), "offsets", len(dels), "groups", len(drop))
	}
}

// durable returns a done callback for appendRecords and the wait for it:
// nil once committed, else the error.
func durable() (func(error), func() error) {
	ch := make(chan error, 1)
	return func(err error) { ch <- err }, func() error { return <-ch }
}
