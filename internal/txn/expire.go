package txn

// Periodic work, as Kafka's TransactionCoordinator schedules it:
// transactions open longer than their timeout are aborted at a bumped
// epoch every transaction.abort.timed.out.transaction.cleanup.interval.ms
// (abortTimedOutTransactions), and transactional ids idle for
// transactional.id.expiration.ms are removed with a tombstone every
// transaction.remove.expired.transaction.cleanup.interval.ms
// (removeExpiredTransactionalIds).

import "github.com/twmb/franz-go/pkg/kerr"

// armTimersLocked starts both periodic tasks if they are not running
// (c.mu held).
func (c *Coordinator) armTimersLocked() {
	if c.closed {
		return
	}
	if c.abortStop == nil {
		c.abortStop = c.clock.AfterFunc(c.cfg.AbortInterval, func() {
			c.periodic(&c.abortStop, c.AbortTimedOut)
		}).Stop
	}
	if c.removeStop == nil {
		c.removeStop = c.clock.AfterFunc(c.cfg.RemoveInterval, func() {
			c.periodic(&c.removeStop, c.RemoveExpired)
		}).Stop
	}
}

// periodic runs task and re-arms it while the coordinator serves any
// partition.
func (c *Coordinator) periodic(stop *func() bool, task func()) {
	c.reconcile()
	c.mu.Lock()
	*stop = nil
	if len(c.shards) > 0 {
		c.armTimersLocked()
	}
	c.mu.Unlock()
	task()
}

// shardList returns the shards (loaded or loading).
func (c *Coordinator) shardList() []*shard {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		out = append(out, s)
	}
	return out
}

// AbortTimedOut aborts every transaction open longer than its timeout, at
// a bumped epoch that fences its producer.
func (c *Coordinator) AbortTimedOut() {
	for _, s := range c.shardList() {
		s.mu.Lock()
		if !s.gone && !s.loading {
			now := c.clock.Now()
			for _, m := range s.txns {
				if m.TimedOut(now) {
					c.fenceAndAbort(s, m, "transaction timed out")
				}
			}
		}
		s.mu.Unlock()
	}
}

// RemoveExpired removes the transactional ids with no transaction in
// progress whose last update is older than transactional.id.expiration.ms.
func (c *Coordinator) RemoveExpired() {
	for _, s := range c.shardList() {
		s.mu.Lock()
		if !s.gone && !s.loading {
			now := c.clock.Now()
			n := 0
			for _, m := range s.txns {
				if !m.Expired(now, c.cfg.IDExpiration) {
					continue
				}
				t, err := m.PrepareDead(now)
				if err != nil {
					continue
				}
				n++
				c.write(s, m, t, func(*kerr.Error) {})
			}
			if n > 0 {
				c.log.Info("expiring transactional ids", "partition", s.index, "ids", n)
			}
		}
		s.mu.Unlock()
	}
}
