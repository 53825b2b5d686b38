package broker

import (
	"errors"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/storage"
)

// flushWorkers is how many partitions fsync at once. Appends between two
// fsyncs of a partition share the second (storage.Log.Sync is a group
// commit), so a few dozen fsyncs in flight keep up with thousands of busy
// partitions, and an idle partition costs no goroutine.
const flushWorkers = 32

// flusher makes appended data durable for every partition of the broker:
// a queue of partitions with unflushed data (each queued at most once) and
// flushWorkers goroutines draining it. Only flushed data counts toward the
// HW (docs/replication.md).
type flusher struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*Partition
	closed bool
	wg     sync.WaitGroup
}

// newFlusher starts the workers, or none with steps (drain flushes then).
func newFlusher(steps bool) *flusher {
	f := &flusher{}
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

// stop ends the workers once their current flushes return.
func (f *flusher) stop() {
	f.mu.Lock()
	f.closed = true
	f.queue = nil
	f.mu.Unlock()
	f.cond.Broadcast()
	f.wg.Wait()
}

// drain flushes every queued partition on the caller's goroutine, until
// the queue is empty (Broker.StepFlush).
func (f *flusher) drain() {
	for {
		f.mu.Lock()
		if len(f.queue) == 0 || f.closed {
			f.mu.Unlock()
			return
		}
		p := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		f.mu.Unlock()
		p.flush()
	}
}

func (f *flusher) work() {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		for len(f.queue) == 0 && !f.closed {
			f.cond.Wait()
		}
		if f.closed {
			f.mu.Unlock()
			return
		}
		p := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		f.mu.Unlock()
		p.flush()
	}
}

// flush runs one fsync round of p's log and reports it to the machine,
// whose processReady queues p again if more was appended meanwhile.
func (p *Partition) flush() {
	p.flushing.Lock()
	defer p.flushing.Unlock()
	var gen uint64
	closed := false
	p.do(func() { gen, closed = p.r.LogGen(), p.closed })
	if closed {
		return
	}
	err := p.log.Sync()
	// From here a kick queues p again; the processReady below re-checks
	// for data appended since this round started.
	p.flushQueued.Store(false)
	if err != nil {
		if errors.Is(err, storage.ErrClosed) || p.ioFailed("fsync", err) {
			// Closed, or the broker halts: nothing this partition
			// appended after its last good fsync counts (never Flushed).
			return
		}
		p.b.log.Error("fsync", "topic", p.Topic, "partition", p.Partition, "err", err)
		if p.b.steps {
			p.b.flusher.kick(p) // the next StepFlush retries
		} else {
			p.b.clock.AfterFunc(100*time.Millisecond, func() { p.b.flusher.kick(p) })
		}
		return
	}
	flushed := p.log.FlushedOffset()
	p.post(func() {
		if !p.closed {
			p.r.Flushed(flushed, gen)
		}
	})
	p.wake() // a follower's next fetch may now go out
}
