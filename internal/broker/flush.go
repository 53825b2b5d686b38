package broker

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

// flushWorkers is how many partitions fsync at once. Appends between two
// fsyncs of a partition share the second (storage.Log.Sync is a group
// commit), so a few dozen fsyncs in flight keep up with thousands of busy
// partitions, and an idle partition costs no goroutine.
const flushWorkers = 32

// syncFSMinPartitions is the setting of how many partitions dirty at once
// make the flusher sync the data directory's whole filesystem once
// (syncfs) instead of fsyncing each.
const syncFSMinPartitions = "sluice.log.flush.syncfs.min.partitions"

// defaultSyncFSMinPartitions is its default (the table's, config.BrokerDef).
const defaultSyncFSMinPartitions = 16

// flusher makes appended data durable for every partition of the broker:
// a queue of partitions with unflushed data (each queued at most once) and
// flushWorkers goroutines draining it. Only flushed data counts toward the
// HW (docs/replication.md).
//
// With a syncer (sluice.log.flush.syncfs.min.partitions), once at least
// minParts partitions are dirty at once — queued, or in an fsync of their
// own — one worker takes the whole queue and makes it durable with one
// syncfs of the data directory's filesystem instead of one fsync per
// partition (flushBatch). One such round runs at a time; while it does,
// the queue waits for the next one, which then covers everything queued
// meanwhile: group commit across partitions.
type flusher struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*Partition
	closed bool
	wg     sync.WaitGroup

	syncer   vfs.FSSyncer // nil: fsync each partition
	dir      string       // the data directory, given to syncer
	minParts int
	single   int  // partitions in an fsync of their own (mu)
	batching bool // a syncfs round runs (mu)

	// batches and batched count syncfs rounds and the partitions they
	// covered (tests).
	batches, batched atomic.Int64
}

// newFlusher starts the workers, or none with steps (drain flushes then).
// syncer, if not nil, replaces the fsyncs of rounds of minParts or more
// partitions with one SyncFS(dir).
func newFlusher(steps bool, syncer vfs.FSSyncer, dir string, minParts int) *flusher {
	f := &flusher{syncer: syncer, dir: dir, minParts: minParts}
	f.cond = sync.NewCond(&f.mu)
	if steps {
		return f
	}
	f.wg.Add(flushWorkers)
	for range flushWorkers {
		go f.work()
	}
	return f
}

// kick queues p for a flush unless it is queued already.
func (f *flusher) kick(p *Partition) {
	if !p.flushQueued.CompareAndSwap(false, true) {
		return
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.queue = append(f.queue, p)
	f.mu.Unlock()
	f.cond.Signal()
}

// stop ends the workers once their current flushes return, and closes
// the syncer (an OS one holds the data directory open).
func (f *flusher) stop() {
	f.mu.Lock()
	f.closed = true
	f.queue = nil
	f.mu.Unlock()
	f.cond.Broadcast()
	f.wg.Wait()
	if c, ok := f.syncer.(io.Closer); ok {
		c.Close()
	}
}

// drain flushes every queued partition on the caller's goroutine, until
// the queue is empty (Broker.StepFlush): the whole queue in one syncfs
// round when it holds minParts partitions or more, else one by one.
func (f *flusher) drain() {
	for {
		f.mu.Lock()
		if len(f.queue) == 0 || f.closed {
			f.mu.Unlock()
			return
		}
		if f.useBatch(len(f.queue)) {
			batch := f.queue
			f.queue = nil
			f.mu.Unlock()
			f.flushBatch(batch)
			continue
		}
		p := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		f.mu.Unlock()
		p.flush()
	}
}

// useBatch reports whether dirty partitions are enough for a syncfs
// round.
func (f *flusher) useBatch(dirty int) bool {
	return f.syncer != nil && f.minParts > 0 && dirty >= f.minParts
}

func (f *flusher) work() {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		for !f.closed && (len(f.queue) == 0 || (f.batching && f.useBatch(len(f.queue)+f.single))) {
			// While a syncfs round runs, a busy queue waits for the
			// next round rather than fsyncing partitions one by one.
			f.cond.Wait()
		}
		if f.closed {
			f.mu.Unlock()
			return
		}
		if f.useBatch(len(f.queue) + f.single) {
			batch := f.queue
			f.queue = nil
			f.batching = true
			f.mu.Unlock()
			f.flushBatch(batch)
			f.mu.Lock()
			f.batching = false
			f.mu.Unlock()
			f.cond.Broadcast()
			continue
		}
		p := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		f.single++
		f.mu.Unlock()
		p.flush()
		f.mu.Lock()
		f.single--
		f.mu.Unlock()
	}
}

// flushBatch makes ps durable with one syncfs: each partition's log
// captures its round (storage.Log.BeginSync), the filesystem is synced
// once, then each log ends its round with that one result and the
// partition reports it as flush does. A failed syncfs fails every log of
// the round, as a failed fsync fails its own.
func (f *flusher) flushBatch(ps []*Partition) {
	type entry struct {
		p     *Partition
		gen   uint64
		round *storage.SyncRound
	}
	ents := make([]entry, 0, len(ps))
	for _, p := range ps {
		p.flushing.Lock()
		var gen uint64
		closed := false
		p.view(func() { gen, closed = p.r.LogGen(), p.closed })
		if closed {
			p.flushing.Unlock()
			continue
		}
		ents = append(ents, entry{p: p, gen: gen, round: p.log.BeginSync()})
	}
	f.batches.Add(1)
	f.batched.Add(int64(len(ents)))
	metrics.FlushRounds.WithLabelValues("syncfs").Inc()
	metrics.FlushPartitions.WithLabelValues("syncfs").Add(float64(len(ents)))
	err := f.syncer.SyncFS(f.dir)
	// Every log's round ends before any partition reports: a truncation
	// waiting for one log's round in its partition's owner step never
	// waits for another partition's report.
	dones := make([]storage.FlushDone, len(ents))
	for i, e := range ents {
		dones[i] = e.round.EndFiles(err)
	}
	for i, e := range ents {
		e.p.flushed(e.gen, dones[i])
		e.p.flushing.Unlock()
	}
}

// flush runs one fsync round of p's log and reports it to the machine,
// whose processReady queues p again if more was appended meanwhile.
func (p *Partition) flush() {
	p.flushing.Lock()
	defer p.flushing.Unlock()
	var gen uint64
	closed := false
	p.view(func() { gen, closed = p.r.LogGen(), p.closed })
	if closed {
		return
	}
	metrics.FlushRounds.WithLabelValues("fsync").Inc()
	metrics.FlushPartitions.WithLabelValues("fsync").Inc()
	p.flushed(gen, p.log.SyncFiles())
}

// flushed hands a flush round of p's log that began at log generation
// gen, its files synced, to p's owner: the log's one writer applies it
// (the flushed offset and the recovery point) and reports it to the
// machine in one step (p.flushing held).
func (p *Partition) flushed(gen uint64, done storage.FlushDone) {
	// From here a kick queues p again; the processReady below re-checks
	// for data appended since this round started.
	p.flushQueued.Store(false)
	if err := done.Err(); err != nil {
		if errors.Is(err, storage.ErrClosed) {
			return
		}
		// A failed fsync is never retried (the page cache may have
		// dropped the data): the log goes offline and the broker halts.
		// Nothing this partition appended after its last good fsync
		// counts (never Flushed). SyncFiles returns only ErrFailed or
		// ErrClosed; anything else is treated as the failure it would be.
		if !errors.Is(err, storage.ErrFailed) {
			err = fmt.Errorf("%w: %w", storage.ErrFailed, err)
		}
		p.ioFailed("fsync", err)
		return
	}
	p.post(func() {
		if p.closed {
			return
		}
		if err := p.log.ApplyFlush(done); err != nil {
			// Writing the recovery point failed: the log is offline.
			p.ioFailed("recovery point", err)
			return
		}
		p.r.Flushed(p.log.FlushedOffset(), gen)
	})
	p.wake() // a follower's next fetch may now go out
}
