package broker

import (
	"slices"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/replica"
)

// Step mode (Options.Steps): the broker runs no goroutine of its own, and
// whoever owns it calls these on one goroutine. Each is one round of a
// background loop of the normal mode (the same code: tickOnce,
// flusher.drain, fetcher.step, alterPartition, retentionOnce), so a
// simulator that owns the clock, the disk and the network runs the real
// driver, deterministically.

// Knobs re-introduce bugs that were fixed, each behind its own switch, so
// that the simulator's tests show it still catches them
// (internal/sim TestRealOldBugsAreCaught). Never set in production.
type Knobs struct {
	// DropQueuedISR drops an ISR proposal the machine makes while another
	// is in flight, instead of sending it once that one is answered (the
	// bug fixed in 1cf2b54: the ISR could stay short forever).
	DropQueuedISR bool
	// ActOnReplayedMetadata makes a restarting broker act on images
	// before one holds this incarnation's registration: the replayed
	// metadata of its previous life (the bug fixed in 3369e98: it led
	// partitions another broker led in the same epoch).
	ActOnReplayedMetadata bool
}

// StepTick is one round of the tick loop.
func (b *Broker) StepTick() {
	if b.tickSt.lastCheckpoint.IsZero() {
		b.tickSt.lastCheckpoint = b.now()
	}
	b.tickOnce(&b.tickSt)
}

// StepAlter sends every ISR proposal whose time has come to the controller
// and applies its answer.
func (b *Broker) StepAlter() {
	for _, a := range b.alters.due(b.now()) {
		a.p.alterPartition(a.req, 0)
	}
}

// StepFlush flushes every partition with unflushed appends and reports the
// flushes to their machines.
func (b *Broker) StepFlush() { b.flusher.drain() }

// StepFetch runs one fetch round, without a long poll, for each leader
// this node follows, in leader order.
func (b *Broker) StepFetch() {
	b.mu.Lock()
	fs := make([]*fetcher, 0, len(b.fetchers))
	for _, f := range b.fetchers {
		fs = append(fs, f)
	}
	b.mu.Unlock()
	slices.SortFunc(fs, func(x, y *fetcher) int { return int(x.leader) - int(y.leader) })
	for _, f := range fs {
		f.step()
	}
}

// StepRetention applies retention to the partitions this node leads.
func (b *Broker) StepRetention() { b.retentionOnce() }

// step is one fetch round of f with no long poll (a failed round leaves
// its partitions to the next step).
func (f *fetcher) step() {
	select {
	case <-f.done:
		return
	default:
	}
	reqs, parts, _ := f.collect()
	if len(reqs) > 0 {
		f.fetchOnce(reqs, parts, 0)
	}
}

// stopFetcher stops f: in the background normally (its round in flight
// may take a while), at once in step mode (it has no goroutine).
func (b *Broker) stopFetcher(f *fetcher) {
	if b.steps {
		f.stop()
		return
	}
	go f.stop()
}

// sendAlter sends an ISR proposal to the controller after delay: in a
// goroutine normally, by StepAlter in step mode.
func (b *Broker) sendAlter(p *Partition, req replica.AlterPartitionRequest, delay time.Duration) {
	if !b.steps {
		go p.alterPartition(req, delay)
		return
	}
	b.alters.add(pendingAlter{p: p, req: req, due: b.now().Add(delay)})
}

// alterQueue holds step mode's ISR proposals until StepAlter.
type alterQueue struct {
	mu    sync.Mutex
	items []pendingAlter
}

type pendingAlter struct {
	p   *Partition
	req replica.AlterPartitionRequest
	due time.Time
}

func (q *alterQueue) add(a pendingAlter) {
	q.mu.Lock()
	q.items = append(q.items, a)
	q.mu.Unlock()
}

// due removes and returns the proposals due at now, in the order queued.
func (q *alterQueue) due(now time.Time) []pendingAlter {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []pendingAlter
	rest := q.items[:0]
	for _, a := range q.items {
		if a.due.After(now) {
			rest = append(rest, a)
		} else {
			out = append(out, a)
		}
	}
	q.items = rest
	return out
}
