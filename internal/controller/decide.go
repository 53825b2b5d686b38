package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// Decisions and how they reach the metadata log.
//
// Every decision of the active controller (an RPC such as CreateTopics or
// AlterPartition, a fencing, a periodic election) is a function that adds
// records to a batch on a scratch copy of the image. Decisions queue up;
// one goroutine, the decision loop, takes every queued decision at once
// (a group), runs them one after the other on the same scratch image (so
// each sees the ones before it, as QuorumController's operations see the
// uncommitted in-memory state of earlier ones), packs their records into
// raft entries, proposes the entries together (hashicorp/raft pipelines
// them and writes them to disk in one batch) and replies to each decision
// once its entries are committed and applied here. A thousand
// AlterPartitions arriving together are then a handful of commits, not a
// thousand fsyncs one after the other (Kafka gets the same from its
// AlterPartitionManager, which sends a broker's pending ISR changes in one
// request, and from the controller's batching of appends).
//
// Entries are bounded: at most maxEntryWeight partition states each
// (QuorumController's DEFAULT_MAX_RECORDS_PER_BATCH, 10,000 records; a
// PartitionChange weighs one, a CreateTopic or CreatePartitions record as
// many as the partitions it carries, at most maxPartitionsPerRecord). Like
// QuorumController.appendRecords, an atomic decision (a topic creation,
// an AlterPartition) is written in one entry and refused if it cannot fit
// in one; a non-atomic one (fencing a broker, a controlled shutdown, a
// re-registration, elections: ControllerResult.of rather than atomicOf)
// is split over as many entries as it needs, in order.
const (
	// maxEntryWeight bounds the partition states in one raft entry
	// (QuorumController's DEFAULT_MAX_RECORDS_PER_BATCH and
	// MAX_RECORDS_PER_USER_OP, 10,000).
	maxEntryWeight = 10000
	// maxPartitionsPerRecord bounds the partitions in one CreateTopic or
	// CreatePartitions record (~100 bytes each in JSON): a topic of
	// 10,000 partitions is ten records in one entry of about 1 MB.
	maxPartitionsPerRecord = 1000
	// maxGroupWeight stops a group once its decisions wrote this much;
	// the rest wait for the next group, so no commit round grows without
	// bound.
	maxGroupWeight = 4 * maxEntryWeight
	// maxGroupDecisions bounds the decisions taken in one group.
	maxGroupDecisions = 1024
	// maxQueuedDecisions is the capacity of the decision queue; a caller
	// beyond it waits (bounded by its context).
	maxQueuedDecisions = 4096
	// maxQueuedAdmin bounds administrative decisions (CreateTopics,
	// CreatePartitions, DeleteTopics, IncrementalAlterConfigs) waiting at
	// once; more are refused with THROTTLING_QUOTA_EXCEEDED (the error
	// KIP-599 gives a throttled topic mutation; clients retry it), so a
	// flood of admin requests can neither grow the queue without bound
	// nor starve heartbeats and AlterPartitions queued behind it.
	maxQueuedAdmin = 256
	// applyTimeout bounds enqueueing one entry into raft.
	applyTimeout = 5 * time.Second
)

// batch is the records of one decision, applied as they are added to a
// scratch image so later records (and later decisions of the group) see
// earlier ones.
type batch struct {
	tx *txn
	// cfg gives topic config defaults (min.insync.replicas for the ELR);
	// nil: Kafka's defaults.
	cfg  *config.Broker
	recs []record
	tail []record
}

// add applies r to the scratch image and appends it to the decision's
// records.
func (b *batch) add(r record) {
	b.tx.apply(&r, placeholderRegOffset)
	b.recs = append(b.recs, r)
}

// addLast applies r to the scratch image now but writes it after every
// other record of the decision. A fence, a controlled shutdown or a
// registration is computed with the broker already out (so elections skip
// it) but committed after the leader and ISR changes it causes, as
// ReplicationControlManager.handleBrokerFenced generates the
// PartitionChangeRecords before the fencing record: when the changes are
// split over several entries, no image shows a fenced broker still
// leading.
func (b *batch) addLast(r record) {
	b.tx.apply(&r, placeholderRegOffset)
	b.tail = append(b.tail, r)
}

// records returns the decision's records in the order they are written.
func (b *batch) records() []record {
	if len(b.tail) == 0 {
		return b.recs
	}
	return append(append([]record(nil), b.recs...), b.tail...)
}

// weight is how many partition states a record carries (at least one).
func (r *record) weight() int {
	switch {
	case r.Type == recCreateTopic && r.Topic != nil:
		return max(1, len(r.Topic.Partitions))
	case r.Type == recCreatePartitions:
		return max(1, len(r.Partitions))
	}
	return 1
}

func recordsWeight(recs []record) int {
	w := 0
	for i := range recs {
		w += recs[i].weight()
	}
	return w
}

// decideOpts qualify a decision.
type decideOpts struct {
	// split lets the records be written over several entries (a
	// non-atomic ControllerResult).
	split bool
	// admin counts the decision against maxQueuedAdmin.
	admin bool
}

// decision is one queued decision.
type decision struct {
	ctx  context.Context
	fn   func(im *metadata.Image, b *batch) error
	opts decideOpts
	done chan decisionResult // buffered: the loop never blocks on it
	// first and last are the indexes, in the group's entries, of the
	// entries holding its records (-1: none).
	first, last int
}

// decisionResult is the outcome of a decision: the offsets of the first
// and last entries holding its records (0 if it wrote none).
type decisionResult struct {
	first, last int64
	err         error
}

func (d *decision) reply(r decisionResult) { d.done <- r }

// decisionQueue feeds the decision loop.
type decisionQueue struct {
	ch    chan *decision
	admin atomic.Int32
	// groups counts commit rounds (tests).
	groups atomic.Int64
}

func (q *decisionQueue) init() { q.ch = make(chan *decision, maxQueuedDecisions) }

// decide runs fn as one atomic decision on the latest image (applied
// entries plus the decisions before it in its group) and commits the
// records it adds in one entry. It returns that entry's offset (0 if
// nothing was written) and fn's error.
func (a *active) decide(ctx context.Context, fn func(im *metadata.Image, b *batch) error) (int64, error) {
	r := a.submit(ctx, decideOpts{}, fn)
	return r.last, r.err
}

// decideSplit is decide for a decision whose records may be split over
// several entries; it returns the offset of the last one.
func (a *active) decideSplit(ctx context.Context, fn func(im *metadata.Image, b *batch) error) (int64, error) {
	r := a.submit(ctx, decideOpts{split: true}, fn)
	return r.last, r.err
}

// decideAdmin is decide for an administrative request, bounded by
// maxQueuedAdmin.
func (a *active) decideAdmin(ctx context.Context, opts decideOpts, fn func(im *metadata.Image, b *batch) error) (int64, error) {
	opts.admin = true
	r := a.submit(ctx, opts, fn)
	return r.last, r.err
}

// submit queues a decision and waits for its outcome.
func (a *active) submit(ctx context.Context, opts decideOpts, fn func(im *metadata.Image, b *batch) error) decisionResult {
	if !a.isActive() {
		return decisionResult{err: kerr.NotController}
	}
	if opts.admin {
		if n := a.q.admin.Add(1); n > maxQueuedAdmin {
			a.q.admin.Add(-1)
			return decisionResult{err: fmt.Errorf("%w: the controller has %d administrative requests queued (at most %d); retry later",
				kerr.ThrottlingQuotaExceeded, n-1, maxQueuedAdmin)}
		}
		defer a.q.admin.Add(-1)
	}
	d := &decision{ctx: ctx, fn: fn, opts: opts, done: make(chan decisionResult, 1)}
	if a.propose != nil {
		// A Machine: decide and commit now, on this goroutine.
		a.commitGroup([]*decision{d})
		return <-d.done
	}
	timedOut := func() decisionResult {
		return decisionResult{err: fmt.Errorf("%w: %v", kerr.RequestTimedOut, ctx.Err())}
	}
	select {
	case a.q.ch <- d:
	case <-ctx.Done():
		return timedOut()
	case <-a.n.closing:
		return decisionResult{err: kerr.NotController}
	}
	select {
	case r := <-d.done:
		return r
	case <-ctx.Done():
		return timedOut()
	case <-a.n.closing:
		return decisionResult{err: kerr.NotController}
	}
}

// decisionLoop makes the queued decisions, a group at a time, for as long
// as the node runs.
func (a *active) decisionLoop() {
	defer a.n.wg.Done()
	var carry []*decision
	for {
		group := carry
		if len(group) == 0 {
			select {
			case <-a.n.closing:
				return
			case d := <-a.q.ch:
				group = append(group, d)
			}
		}
	drain:
		for len(group) < maxGroupDecisions {
			select {
			case d := <-a.q.ch:
				group = append(group, d)
			default:
				break drain
			}
		}
		carry = a.commitGroup(group)
	}
}

// commitGroup makes a group of decisions and commits their records. It
// returns the decisions left for the next group (beyond maxGroupWeight).
func (a *active) commitGroup(group []*decision) (rest []*decision) {
	a.q.groups.Add(1)
	if !a.isActive() {
		for _, d := range group {
			d.reply(decisionResult{err: kerr.NotController})
		}
		return nil
	}
	base := a.n.st.Image()
	tx := newTxn(base)
	var (
		accepted []record   // every record of the group, in write order
		entries  [][]record // the group's entries
		cur      []record
		curW     int
		weight   int
		made     []*decision
	)
	flush := func() {
		if len(cur) > 0 {
			entries = append(entries, cur)
			cur, curW = nil, 0
		}
	}
	for i, d := range group {
		if weight >= maxGroupWeight {
			rest = group[i:]
			break
		}
		if err := d.ctx.Err(); err != nil {
			d.reply(decisionResult{err: fmt.Errorf("%w: %v", kerr.RequestTimedOut, err)})
			continue
		}
		b := &batch{tx: tx, cfg: a.n.cfg.Broker}
		err := d.fn(tx.im, b)
		recs := b.records()
		w := recordsWeight(recs)
		if err == nil && !d.opts.split && w > maxEntryWeight {
			// QuorumController turns the BoundedListTooLongException of
			// an oversized operation into this PolicyViolationException
			// (EventHandlerExceptionInfo); the limits checked before
			// placement make it unreachable for CreateTopics.
			err = fmt.Errorf("%w: Unable to perform excessively large batch operation (%d partition states; at most %d in one metadata entry)",
				kerr.PolicyViolation, w, maxEntryWeight)
		}
		if err != nil {
			if len(recs) > 0 {
				// Undo the failed decision's effect on the scratch image.
				tx = newTxn(base)
				for j := range accepted {
					tx.apply(&accepted[j], placeholderRegOffset)
				}
			}
			d.reply(decisionResult{err: err})
			continue
		}
		d.first, d.last = -1, -1
		made = append(made, d)
		if len(recs) == 0 {
			continue
		}
		accepted = append(accepted, recs...)
		weight += w
		if !d.opts.split {
			if curW+w > maxEntryWeight {
				flush()
			}
			d.first, d.last = len(entries), len(entries)
			cur = append(cur, recs...)
			curW += w
			continue
		}
		for _, r := range recs {
			if rw := r.weight(); curW+rw > maxEntryWeight {
				flush()
			}
			if d.first < 0 {
				d.first = len(entries)
			}
			cur = append(cur, r)
			curW += r.weight()
		}
		d.last = len(entries)
	}
	flush()
	offs, failed, err := a.proposeAll(entries)
	for _, d := range made {
		switch {
		case d.last >= 0 && d.last >= failed:
			d.reply(decisionResult{err: err})
		case d.last >= 0:
			d.reply(decisionResult{first: offs[d.first], last: offs[d.last]})
		default:
			d.reply(decisionResult{})
		}
	}
	return rest
}

// proposeAll proposes the entries in order (raft pipelines them) and waits
// until each is committed and applied here. It returns their offsets and,
// on failure, the index of the first entry that failed (len(entries) if
// none) and the error.
func (a *active) proposeAll(entries [][]record) ([]int64, int, error) {
	if a.propose != nil {
		return a.propose(entries)
	}
	offs := make([]int64, len(entries))
	futures := make([]raft.ApplyFuture, len(entries))
	sizes := make([]int, len(entries))
	for i, recs := range entries {
		data, err := json.Marshal(recs)
		if err != nil {
			return offs, i, fmt.Errorf("%w: encoding metadata records: %v", kerr.UnknownServerError, err)
		}
		sizes[i] = len(data)
		futures[i] = a.n.raft.Apply(data, applyTimeout)
	}
	for i, f := range futures {
		if err := f.Error(); err != nil {
			// Entries after a failed one fail too (leadership is lost or
			// raft is shutting down); wait for them so none is left
			// unobserved.
			for _, g := range futures[i+1:] {
				g.Error()
			}
			return offs, i, raftErr(err)
		}
		offs[i] = int64(f.Index())
		a.n.stats.note(len(entries[i]), sizes[i])
	}
	return offs, len(entries), nil
}

// raftErr maps a raft Apply error to the Kafka error a caller sees.
func raftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %v", kerr.NotController, err)
	}
	return fmt.Errorf("%w: raft apply: %v", kerr.UnknownServerError, err)
}
