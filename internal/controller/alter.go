package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// AlterPartition batching, on the broker side of the controller client.
//
// A broker has one AlterPartition in flight per partition it leads; when a
// follower of thousands of partitions comes back, thousands of ISR
// expansions are proposed at once. Kafka's AlterPartitionManager queues
// them and sends a broker's pending items in one AlterPartition request,
// with one request in flight at a time; the controller handles the request
// as one operation. sluice does the same: Node.AlterPartition queues the
// proposal, one sender per node takes everything queued (up to
// maxAlterBatch) into one AlterPartitions RPC, and the active controller
// validates each in order and commits their PartitionChanges together.
// One RPC and a few raft commits replace one connection, one RPC and one
// commit per partition.

// maxAlterBatch bounds the proposals in one AlterPartitions RPC (a frame
// of a few hundred kB).
const maxAlterBatch = 2000

type alterPartitionsReq struct {
	Reqs []metadata.AlterPartitionRequest `json:"reqs"`
}

type alterPartitionsResp struct {
	Resps []metadata.AlterPartitionResponse `json:"resps"`
}

// alterPartitions is AlterPartition for many partitions: each is validated
// against the image including the ones before it and answered on its own.
func (a *active) alterPartitions(ctx context.Context, body []byte) (any, int64, error) {
	var in alterPartitionsReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	if len(in.Reqs) > maxAlterBatch {
		return nil, 0, fmt.Errorf("%w: %d partitions in one AlterPartitions (at most %d)", kerr.InvalidRequest, len(in.Reqs), maxAlterBatch)
	}
	out := alterPartitionsResp{Resps: make([]metadata.AlterPartitionResponse, len(in.Reqs))}
	off, err := a.decideSplit(ctx, func(im *metadata.Image, b *batch) error {
		for i := range in.Reqs {
			out.Resps[i] = alterOne(b, &in.Reqs[i])
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, off, nil
}

// alterBatcher queues a node's AlterPartition proposals.
type alterBatcher struct {
	mu      sync.Mutex
	pending []*alterItem
	sending bool
}

type alterItem struct {
	ctx  context.Context
	req  metadata.AlterPartitionRequest
	done chan alterResult // buffered
}

type alterResult struct {
	resp metadata.AlterPartitionResponse
	err  error
}

// AlterPartition implements metadata.Controller: the proposal is sent to
// the active controller with the others queued on this node (see above).
// Validation failures are in the response's Error; transport failures
// are the error.
func (n *Node) AlterPartition(ctx context.Context, req metadata.AlterPartitionRequest) (metadata.AlterPartitionResponse, error) {
	it := &alterItem{ctx: ctx, req: req, done: make(chan alterResult, 1)}
	b := &n.alters
	b.mu.Lock()
	select {
	case <-n.closing:
		b.mu.Unlock()
		return metadata.AlterPartitionResponse{}, net.ErrClosed
	default:
	}
	b.pending = append(b.pending, it)
	start := !b.sending
	b.sending = true
	b.mu.Unlock()
	if start {
		n.wg.Add(1)
		go n.sendAlters()
	}
	select {
	case r := <-it.done:
		return r.resp, r.err
	case <-ctx.Done():
		return metadata.AlterPartitionResponse{}, fmt.Errorf("%w: controller AlterPartition: %v", kerr.RequestTimedOut, ctx.Err())
	}
}

// sendAlters sends the queued proposals, a batch at a time, until none is
// left.
func (n *Node) sendAlters() {
	defer n.wg.Done()
	b := &n.alters
	for {
		b.mu.Lock()
		var items []*alterItem
		for len(b.pending) > 0 && len(items) < maxAlterBatch {
			it := b.pending[0]
			b.pending = b.pending[1:]
			if it.ctx.Err() == nil {
				items = append(items, it)
			}
		}
		if len(items) == 0 {
			b.pending = nil
			b.sending = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		n.sendAlterBatch(items)
	}
}

func (n *Node) sendAlterBatch(items []*alterItem) {
	if len(items) == 1 {
		var resp metadata.AlterPartitionResponse
		err := n.write(items[0].ctx, opAlterPartition, items[0].req, &resp)
		items[0].done <- alterResult{resp, err}
		return
	}
	in := alterPartitionsReq{Reqs: make([]metadata.AlterPartitionRequest, len(items))}
	for i, it := range items {
		in.Reqs[i] = it.req
	}
	var out alterPartitionsResp
	err := n.write(n.baseCtx, opAlterPartitions, in, &out)
	if errors.Is(err, kerr.UnsupportedVersion) {
		// An active controller of an older version: one at a time.
		for _, it := range items {
			var resp metadata.AlterPartitionResponse
			err := n.write(it.ctx, opAlterPartition, it.req, &resp)
			it.done <- alterResult{resp, err}
		}
		return
	}
	if err == nil && len(out.Resps) != len(items) {
		err = fmt.Errorf("%w: AlterPartitions answered %d of %d partitions", kerr.UnknownServerError, len(out.Resps), len(items))
	}
	for i, it := range items {
		if err != nil {
			it.done <- alterResult{err: err}
		} else {
			it.done <- alterResult{resp: out.Resps[i]}
		}
	}
}
