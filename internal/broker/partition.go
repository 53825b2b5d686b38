package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/internal/storage"
)

// TP names a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

// Partition is this node's replica of one partition. On a single node it is
// always the leader: its high watermark is the flushed log end offset, so a
// consumer never sees a record that a crash could take away (DESIGN
// decision 4).
type Partition struct {
	TP
	log *storage.Log

	leaderEpoch atomic.Int32
	hw          atomic.Int64

	// notifyMu guards notify, which is closed (and replaced) whenever the
	// high watermark or log start offset moves, waking long-poll fetches.
	notifyMu sync.Mutex
	notify   chan struct{}

	// flushing is set while a background flush (for acks=0 appends) runs.
	flushing atomic.Bool
}

func newPartition(tp TP, log *storage.Log, leaderEpoch int32) *Partition {
	p := &Partition{TP: tp, log: log, notify: make(chan struct{})}
	p.leaderEpoch.Store(leaderEpoch)
	p.hw.Store(log.FlushedOffset())
	return p
}

// Log is the partition's local log.
func (p *Partition) Log() *storage.Log { return p.log }

// LeaderEpoch is the current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// HighWatermark is the first offset not yet committed: consumers read below it.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LogStartOffset is the first readable offset.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the offset the next append receives.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// Changed returns a channel closed at the next high-watermark or log-start
// change.
func (p *Partition) Changed() <-chan struct{} {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	return p.notify
}

func (p *Partition) wake() {
	p.notifyMu.Lock()
	close(p.notify)
	p.notify = make(chan struct{})
	p.notifyMu.Unlock()
}

// advanceHW raises the high watermark to the flushed offset (never lowers it).
func (p *Partition) advanceHW() {
	flushed := p.log.FlushedOffset()
	for {
		cur := p.hw.Load()
		if flushed <= cur {
			return
		}
		if p.hw.CompareAndSwap(cur, flushed) {
			p.wake()
			return
		}
	}
}

// Append appends one validated client batch as leader and returns what was
// appended (or, for an idempotent duplicate, the original offsets). It does
// not wait for durability: call Commit for that.
func (p *Partition) Append(batch []byte, now time.Time) (storage.AppendInfo, error) {
	return p.log.AppendAsLeader(batch, p.leaderEpoch.Load(), now)
}

// Commit waits until every offset below end is durable and committed (below
// the high watermark). With group commit, concurrent callers share an fsync.
func (p *Partition) Commit(end int64) error {
	if p.hw.Load() >= end {
		return nil
	}
	if err := p.log.SyncTo(end); err != nil {
		return err
	}
	p.advanceHW()
	return nil
}

// CommitAsync makes appended data durable in the background (acks=0): the
// data becomes visible to consumers once flushed.
func (p *Partition) CommitAsync() {
	if !p.flushing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		// Let concurrent acks=0 appends gather into one fsync.
		time.Sleep(2 * time.Millisecond)
		p.flushing.Store(false)
		if err := p.log.Sync(); err == nil {
			p.advanceHW()
		}
		if p.log.FlushedOffset() < p.log.LogEndOffset() {
			p.CommitAsync()
		}
	}()
}

// AdvanceLogStart raises the log start offset (DeleteRecords); it cannot
// pass the high watermark.
func (p *Partition) AdvanceLogStart(offset int64) error {
	if err := p.log.AdvanceLogStart(offset); err != nil {
		return err
	}
	p.wake()
	return nil
}
