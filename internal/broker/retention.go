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
	for _, p := range b.Partitions() {
		if !p.IsLeader() {
			continue
		}
		n, err := p.log.ApplyRetention(b.now(), p.HighWatermark())
		if err != nil {
			if !p.ioFailed("retention", err) {
				b.log.Warn("retention", "topic", p.Topic, "partition", p.Partition, "err", err)
			}
			continue
		}
		if n > 0 {
			p.AdvanceLogStart(p.log.LogStartOffset())
		}
	}
}
