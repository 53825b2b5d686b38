package broker

import (
	"slices"
	"sync"

	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/storage"
)

// Step mode (Options.Steps): the broker runs no goroutine of its own, and
// whoever owns it calls these on one goroutine. Each is one round of a
// background loop of the normal mode (the same code: tickOnce,
// flusher.drain, fetcher.step, alterPartition, retentionOnce,
// cleaner.once; StepRemote, the remote log manager's pass, is in
// rlmstep.go), so a simulator that owns the clock, the disk and the
// network runs the real driver, deterministically.

// Knobs re-introduce bugs that were fixed, each behind its own switch, so
// that the simulator's tests show it still catches them
// (internal/sim TestRealOldBugsAreCaught). Never set in production.
type Knobs struct {
	// DropQueuedISR drops an ISR proposal the machine makes while another
	// is in flight, instead of sending it once that one is answered (the
	// bug fixed in 1cf2b54, then in the driver, now in the machine:
	// replica.Config.DropQueuedProposal; the ISR could stay short
	// forever).
	DropQueuedISR bool
	// ActOnReplayedMetadata makes a restarting broker act on images
	// before one holds this incarnation's registration: the replayed
	// metadata of its previous life (the bug fixed in 3369e98: it led
	// partitions another broker led in the same epoch).
	ActOnReplayedMetadata bool
	// KeepMachineProducers skips replacing the replica machine's producer
	// state with the log's after a truncation (replica.ResetProducers; the
	// real-broker simulator found the bug at its seed 847: a follower
	// restarted after seeing a marker, then truncated it, kept the
	// transaction closed and served its aborted records as stable). The
	// machine now also learns at its start the transactions completed
	// above its HW (replica.LogState.Completed), which reopens such a
	// transaction by itself, so the knob withholds those too: the machine
	// then knows only what it appended since its start, as before both.
	KeepMachineProducers bool
	// AcceptLateMarkers lets a late transaction version 2 marker end the
	// producer's next transaction (replica.Config.AcceptLateMarkers).
	AcceptLateMarkers bool
	// AnswerDeleteRecordsEarly answers DeleteRecords once the leader has
	// raised its own log start, without waiting for the low watermark
	// (replica.Config.AnswerDeleteRecordsEarly; the real-broker simulator
	// found it: a new leader that had not learnt the log start served the
	// deleted records again).
	AnswerDeleteRecordsEarly bool
	// StableUnreplicatedTxns lets the last stable offset pass a
	// transaction whose marker is not yet below the HW
	// (replica.Config.StableUnreplicatedTxns).
	StableUnreplicatedTxns bool
	// DeleteLocalBeforeCopyFinished lets local retention delete a segment
	// being copied to the remote log once its objects are written, before
	// its COPY_SEGMENT_FINISHED is committed (rlm.go copySegment): a crash
	// or a lost metadata write then leaves its records in no tier.
	DeleteLocalBeforeCopyFinished bool
	// CopyAboveHW lets the remote log manager copy segments that are not
	// wholly below the high watermark (rlm.go eligible): records a new
	// leader truncates can be in the remote log.
	CopyAboveHW bool
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
	for _, a := range b.alters.take() {
		a.p.alterPartition(a.req)
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

// StepClean runs one pass of the log cleaner (cleaner.once, as each
// cleaner thread does): it picks the compacted log most in need of
// cleaning, if one is due, and cleans it, on the broker's clock, with no
// throttle sleep. Each call starts from a fresh cleaner state, so a log
// found corrupt is not remembered as uncleanable between calls (the
// simulator's logs never are). Nothing when log.cleaner.enable is false.
func (b *Broker) StepClean() {
	c := b.newCleaner()
	if c == nil {
		return
	}
	c.once(storage.NewOffsetMap(c.budget))
}

// step is one fetch round of f with no long poll (a failed round leaves
// its partitions to the next step).
func (f *fetcher) step() {
	select {
	case <-f.done:
		return
	default:
	}
	reqs, parts, _, _ := f.collect()
	if len(reqs) > 0 {
		f.fetchOnce(reqs, parts, 0)
	}
}

// stopFetcher stops f: in the background normally (its round in flight
// may take a while; Close waits for it), at once in step mode (it has no
// goroutine). Called with applyMu and mu held (assignFetcher), so never
// after Close has stopped the reconciliation and goBackground refuses.
func (b *Broker) stopFetcher(f *fetcher) {
	if b.steps {
		f.stop()
		return
	}
	b.goBackground(f.stop)
}

// sendAlter sends an ISR proposal to the controller: in a goroutine
// normally, by StepAlter in step mode.
func (b *Broker) sendAlter(p *Partition, req replica.AlterPartitionRequest) {
	if !b.steps {
		b.goBackground(func() { p.alterPartition(req) })
		return
	}
	b.alters.add(pendingAlter{p: p, req: req})
}

// alterQueue holds step mode's ISR proposals until StepAlter.
type alterQueue struct {
	mu    sync.Mutex
	items []pendingAlter
}

type pendingAlter struct {
	p   *Partition
	req replica.AlterPartitionRequest
}

func (q *alterQueue) add(a pendingAlter) {
	q.mu.Lock()
	q.items = append(q.items, a)
	q.mu.Unlock()
}

// take removes and returns the queued proposals, in the order queued.
func (q *alterQueue) take() []pendingAlter {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}
