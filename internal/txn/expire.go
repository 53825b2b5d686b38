package txn

// Periodic work, as Kafka's TransactionCoordinator schedules it:
// transactions open longer than their timeout are aborted at a bumped
// epoch every transaction.abort.timed.out.transaction.cleanup.interval.ms
// (abortTimedOutTransactions), and transactional ids idle for
// transactional.id.expiration.ms are removed with a tombstone every
// transaction.remove.expired.transaction.cleanup.interval.ms
// (removeExpiredTransactionalIds). Each shard runs both as timers of its
// owner, armed when it is loaded.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/coord"
)

// armTimers arms both periodic tasks of s (owner).
func (c *Coordinator) armTimers(s *shard) {
	c.arm(s, "abort", c.cfg.AbortInterval, c.abortShard)
	c.arm(s, "remove", c.cfg.RemoveInterval, c.removeShard)
}

// arm runs task on s every interval (owner).
func (c *Coordinator) arm(s *shard, key string, every time.Duration, task func(*shard)) {
	s.Schedule(key, s.Now().Add(every), func(s *shard) {
		c.periodic(s)
		if s.Gone() {
			return
		}
		task(s)
		c.arm(s, key, every, task)
	})
}

// periodic checks, on a timer of s, that s is still owned (else unloads
// it) and reconciles the other partitions in the background.
func (c *Coordinator) periodic(s *shard) {
	if !c.owns(s.Partition()) {
		s.Unload()
	}
	if c.stepped {
		c.reconcile() // a stepped Resign does not wait: an event may call it
		return
	}
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		c.reconcile()
	}()
}

// forEachShard runs fn on the owner of every loaded shard, one after
// another; loading is set if one was still loading.
func (c *Coordinator) forEachShard(fn func(s *shard)) (loading bool) {
	for _, i := range c.rt.Partitions() {
		if err := c.rt.Run(i, fn); err == coord.ErrLoading {
			loading = true
		}
	}
	return loading
}

// AbortTimedOut aborts every transaction open longer than its timeout, at
// a bumped epoch that fences its producer.
func (c *Coordinator) AbortTimedOut() { c.forEachShard(c.abortShard) }

// abortShard is AbortTimedOut on one shard (owner).
func (c *Coordinator) abortShard(s *shard) {
	now := c.clock.Now()
	for _, m := range s.State().txns {
		if m.TimedOut(now) {
			c.fenceAndAbort(s, m, "transaction timed out")
		}
	}
}

// RemoveExpired removes the transactional ids with no transaction in
// progress whose last update is older than transactional.id.expiration.ms.
func (c *Coordinator) RemoveExpired() { c.forEachShard(c.removeShard) }

// removeShard is RemoveExpired on one shard (owner).
func (c *Coordinator) removeShard(s *shard) {
	now := c.clock.Now()
	n := 0
	for _, m := range s.State().txns {
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
		c.log.Info("expiring transactional ids", "partition", s.Partition(), "ids", n)
	}
}
