package broker

import (
	"time"
)

// RetentionCheckedAt returns the time, by the broker's clock, at which
// the latest completed retention pass started (the zero time before the
// first): every partition this node led then had retention.ms and
// retention.bytes applied as of that time or later. A test on a manual
// clock waits for it to reach the time it advanced to, rather than
// sleeping through passes it hopes ran.
func (b *Broker) RetentionCheckedAt() time.Time {
	ns := b.retentionAt.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// retentionLoop applies retention.ms / retention.bytes every
// log.retention.check.interval.ms on the partitions this node leads.
func (b *Broker) retentionLoop() {
	defer b.wg.Done()
	every := time.Duration(b.cfg.Int("log.retention.check.interval.ms", 300000)) * time.Millisecond
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	t := b.clock.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.closing:
			return
		case <-t.C():
		}
		b.retentionOnce()
	}
}

// retentionOnce applies retention to every partition this node leads.
func (b *Broker) retentionOnce() {
	start := b.now()
	defer b.retentionAt.Store(start.UnixNano())
	unstored := 0
	for _, p := range b.Partitions() {
		if p.IsLeader() {
			p.retain(b.now())
			if b.rlm == nil && p.log.Config().RemoteStorage {
				unstored++
			}
		}
	}
	if unstored > 0 {
		b.log.Warn("partitions with remote.storage.enable on a broker without an object store: nothing is copied, so local.retention.* deletes nothing", "partitions", unstored)
	}
}

// retain applies retention.ms and retention.bytes to p's log as a step of
// p's owner, the log's one writer (docs/storage.md, "One writer"): the
// segments deleted and the log start raised are its changes, and the
// machine learns the new log start in the same step, as from a
// DeleteRecords (Kafka's UnifiedLog.deleteOldSegments raises the log
// start with the segments it deletes).
func (p *Partition) retain(now time.Time) {
	var err error
	moved := false
	p.do(func() {
		if p.closed || !p.isLeader.Load() {
			return
		}
		var n int
		if p.log.Config().RemoteStorage {
			// Tiered storage: only copied segments go locally, and the
			// remote log manager's expiration moves the log start
			// (rlm.go).
			copied := int64(-1)
			if p.b.rlm != nil {
				copied = p.b.rlm.copiedEnd(p.TP)
			}
			_, err = p.log.ApplyLocalRetention(now, p.localRetentionBound(copied))
			return
		}
		n, err = p.log.ApplyRetention(now, p.r.HW())
		// Retention deletes only segments wholly below the HW; the
		// machine takes a log start up to the HW (as AdvanceLogStart).
		if ls := p.log.LogStartOffset(); err == nil && n > 0 && ls <= p.r.HW() {
			p.r.AdvanceLogStart(ls)
			moved = true
		}
	})
	if err != nil {
		if !p.ioFailed("retention", err) {
			p.b.log.Warn("retention", "topic", p.Topic, "partition", p.Partition, "err", err)
		}
		return
	}
	if moved {
		p.wake()
	}
}
