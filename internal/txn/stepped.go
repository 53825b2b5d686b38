package txn

// The stepped coordinator (Options.Stepped), for the deterministic
// simulator (internal/sim), which runs the brokers in step mode on one
// goroutine: the coordinator starts no goroutine and never blocks. Its
// runtime is stepped (coord.Config.Stepped); a request (InitProducerID,
// AddPartitions, EndTxn) runs its event on the caller, which is then the
// shard's owner, and answers with a Result whose Poll says when the
// answer is there (the write committed); Step runs the rest of the work:
// the shards' loads, commit waits and timers, and the marker rounds of
// prepared transactions.
//
// The decisions are the goroutine mode's, from the same code: which
// partitions still need a marker and which leader gets each
// (markerTargets), what each marker says (newMarker), what an answer
// means (markerCodes), the retry backoff, the completion written once all
// are done (complete), the roll forward on load, the timeouts. What
// differs: a marker round is one WriteTxnMarkers request per leader
// handed to a StepSender, which answers later through a callback (no
// batching of several transactions' markers per broker); a failed
// completion is retried from a shard timer instead of a sleeping
// goroutine; the periodic reconciliation runs inline; AddPartitionsToTxn
// during a transaction's completion answers CONCURRENT_TRANSACTIONS at
// once (as Kafka does) instead of being held.

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StepSender sends a stepped coordinator's WriteTxnMarkers requests. Send
// must not block: done is called later, on the stepper's goroutine (or
// before Send returns), with the response or the failure of the request.
type StepSender interface {
	Send(node int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error))
}

// Knobs re-introduce bugs into the coordinator, each behind its own
// switch, so that the simulator's tests show it catches them
// (internal/sim TestRealTxnBugsAreCaught). Never set in production.
type Knobs struct {
	// AnswerEndTxnEarly answers EndTxn as soon as PrepareCommit or
	// PrepareAbort is appended, before it is committed: a coordinator
	// failover then loses a decision the producer was told of.
	AnswerEndTxnEarly bool
	// ReadUncommitted answers the requests that write nothing from the
	// state as loaded, records above the high watermark included
	// (fromCommitted): a retried EndTxn is answered from a completion a
	// coordinator elected next may not have.
	ReadUncommitted bool
}

// stepState is a stepped coordinator's marker work.
type stepState struct {
	sender StepSender
	jobs   []*markerJob
}

// markerJob is the second phase of one prepared transaction: what
// sendMarkers' goroutine holds in the goroutine mode.
type markerJob struct {
	s          *shard
	m          *Metadata
	commit     bool
	pid        int64
	epoch      int16
	coordEpoch int32
	tv         int16
	pending    map[Partition]struct{}
	inflight   int  // requests of the current round not answered yet
	fenced     bool // a partition fenced the markers
	next       time.Time
	backoff    time.Duration
}

// addMarkerJob starts the markers of a prepared transaction (owner): the
// first round goes at the next Step.
func (c *Coordinator) addMarkerJob(s *shard, m *Metadata, commit bool, pid int64, epoch int16, coordEpoch int32, tv int16, parts []Partition) {
	j := &markerJob{s: s, m: m, commit: commit, pid: pid, epoch: epoch, coordEpoch: coordEpoch, tv: tv,
		pending: make(map[Partition]struct{}, len(parts)), backoff: c.cfg.MarkerBackoff}
	for _, p := range parts {
		j.pending[p] = struct{}{}
	}
	c.steps.jobs = append(c.steps.jobs, j)
}

// Step runs one unit of a stepped coordinator's work, if one is ready, and
// reports whether it ran one: a unit of the runtime's (coord.Runtime.Step)
// or a marker round of a prepared transaction whose time came.
func (c *Coordinator) Step() bool {
	if c.rt.Step() {
		return true
	}
	return c.stepMarkers()
}

// Drain steps until no work is ready and returns how many units ran.
func (c *Coordinator) Drain() int {
	n := 0
	for c.Step() {
		n++
	}
	return n
}

// stepMarkers moves the first marker job that can move: it is dropped
// (its shard unloaded, its markers fenced), its completion posted (every
// partition done), or its next round sent.
func (c *Coordinator) stepMarkers() bool {
	now := c.clock.Now()
	for i, j := range c.steps.jobs {
		if j.inflight > 0 {
			continue
		}
		drop := func() bool {
			c.steps.jobs = slices.Delete(c.steps.jobs, i, i+1)
			return true
		}
		switch {
		case j.s.Gone():
			return drop()
		case j.fenced:
			c.log.Warn("transaction markers fenced: a newer coordinator or producer epoch exists", "producer.id", j.pid, "epoch", j.epoch)
			return drop()
		case len(j.pending) == 0:
			m, pid, epoch := j.m, j.pid, j.epoch
			j.s.Post(func(s *shard) { c.complete(s, m, pid, epoch) })
			return drop()
		case now.Before(j.next):
			continue
		}
		c.markerRound(j)
		return true
	}
	return false
}

// markerRound sends j's markers to the leaders of its pending partitions;
// once every request is answered, the next round waits for the backoff
// (doubling up to a second), as sendMarkers does.
func (c *Coordinator) markerRound(j *markerJob) {
	byNode := markerTargets(c.b.Image(), j.pending)
	nodes := make([]int32, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	roundDone := func() {
		if len(j.pending) > 0 {
			j.next = c.clock.Now().Add(j.backoff)
			j.backoff = min(2*j.backoff, time.Second)
		}
	}
	if len(nodes) == 0 {
		roundDone()
		return
	}
	j.inflight = len(nodes)
	for _, node := range nodes {
		ps := byNode[node]
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Version = 2
		req.Markers = append(req.Markers, newMarker(j.commit, j.pid, j.epoch, j.coordEpoch, j.tv, ps))
		c.steps.sender.Send(node, req, func(resp *kmsg.WriteTxnMarkersResponse, err error) {
			j.inflight--
			if err == nil {
				codes := map[Partition]int16{}
				for _, m := range resp.Markers {
					if m.ProducerID != j.pid {
						continue
					}
					for _, t := range m.Topics {
						for _, p := range t.Partitions {
							codes[Partition{t.Topic, p.Partition}] = p.ErrorCode
						}
					}
				}
				if c.markerCodes(j.pending, ps, codes, j.commit, j.pid) {
					j.fenced = true
				}
			}
			if j.inflight == 0 {
				roundDone()
			}
		})
	}
}

// runStepped runs fn on partition i's shard for a stepped coordinator:
// the caller is the stepper, so it steps the runtime until fn ran (the
// shard's earlier work first). A shard still loading answers
// COORDINATOR_LOAD_IN_PROGRESS, as Run does.
func (c *Coordinator) runStepped(i int32, fn func(s *shard)) *kerr.Error {
	if info, ok := c.rt.Info(i); ok && info.Loading {
		return kerr.CoordinatorLoadInProgress
	}
	ran := false
	if err := c.rt.Post(i, func(s *shard) { ran = true; fn(s) }); err != nil {
		return runError(err)
	}
	for !ran && c.rt.Step() {
	}
	if !ran {
		return kerr.NotCoordinator
	}
	return nil
}
