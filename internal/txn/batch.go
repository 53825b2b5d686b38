package txn

// Markers are batched per broker, as Kafka's TransactionMarkerChannelManager
// keeps one queue per destination broker: while a WriteTxnMarkers request
// to a broker is in flight, the markers of other transactions for it
// wait, and the next request carries all of them (up to
// maxBatchPartitions partitions), so many transactions ending at once cost
// a few requests and replication waits instead of one each.

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxBatchPartitions bounds the partitions of one WriteTxnMarkers request
// (a single transaction's marker may exceed it alone).
const maxBatchPartitions = 10000

// markerQueues holds the markers waiting for each broker.
type markerQueues struct {
	c *Coordinator
	// ctx ends when the coordinator closes: requests in flight stop.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	queues  map[int32][]*queuedMarker
	running map[int32]bool
}

// queuedMarker is one transaction's marker for the partitions one broker
// leads; done receives its outcome once.
type queuedMarker struct {
	ctx    context.Context // ends when its shard resigns
	marker kmsg.WriteTxnMarkersRequestMarker
	done   chan markerOutcome
}

// markerOutcome is a marker's answer: each partition's error code, or the
// failure of the whole request.
type markerOutcome struct {
	codes map[Partition]int16
	err   error
}

func newMarkerQueues(c *Coordinator) *markerQueues {
	ctx, cancel := context.WithCancel(context.Background())
	return &markerQueues{c: c, ctx: ctx, cancel: cancel, queues: map[int32][]*queuedMarker{}, running: map[int32]bool{}}
}

// send queues m for node and waits for its outcome (or ctx's end).
func (q *markerQueues) send(ctx context.Context, node int32, m kmsg.WriteTxnMarkersRequestMarker) markerOutcome {
	qm := &queuedMarker{ctx: ctx, marker: m, done: make(chan markerOutcome, 1)}
	q.mu.Lock()
	q.queues[node] = append(q.queues[node], qm)
	if !q.running[node] {
		q.running[node] = true
		go q.run(node)
	}
	q.mu.Unlock()
	select {
	case out := <-qm.done:
		return out
	case <-ctx.Done():
		return markerOutcome{err: ctx.Err()}
	}
}

// run sends node's queue, a batch per request, until it is empty.
func (q *markerQueues) run(node int32) {
	for {
		q.mu.Lock()
		pending := q.queues[node]
		n, parts := 0, 0
		for n < len(pending) && (n == 0 || parts < maxBatchPartitions) {
			for _, t := range pending[n].marker.Topics {
				parts += len(t.Partitions)
			}
			n++
		}
		if n == 0 {
			delete(q.queues, node)
			q.running[node] = false
			q.mu.Unlock()
			return
		}
		batch := pending[:n:n]
		q.queues[node] = append([]*queuedMarker(nil), pending[n:]...)
		q.mu.Unlock()
		q.sendBatch(node, batch)
	}
}

// sendBatch sends one request with the markers of batch still wanted.
func (q *markerQueues) sendBatch(node int32, batch []*queuedMarker) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 2
	var live []*queuedMarker
	for _, qm := range batch {
		if qm.ctx.Err() == nil {
			live = append(live, qm)
			req.Markers = append(req.Markers, qm.marker)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(q.ctx, markerTimeout)
	resp, err := q.c.markers.Send(ctx, node, req)
	cancel()
	byPID := map[int64]map[Partition]int16{}
	if err == nil {
		for _, m := range resp.Markers {
			codes := byPID[m.ProducerID]
			if codes == nil {
				codes = map[Partition]int16{}
				byPID[m.ProducerID] = codes
			}
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					codes[Partition{t.Topic, p.Partition}] = p.ErrorCode
				}
			}
		}
	}
	for _, qm := range live {
		if err != nil {
			qm.done <- markerOutcome{err: err}
			continue
		}
		qm.done <- markerOutcome{codes: byPID[qm.marker.ProducerID]}
	}
}
