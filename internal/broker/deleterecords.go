package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/replica"
)

// DeleteRecords (KIP-107) on a leader: the replica machine raises the log
// start offset at once and completes the request once every live replica
// has raised its own (replica.Replica.DeleteRecords, the machine's
// DelayedDeleteRecords); the driver only hands the answer over.

// DeleteResult is the outcome of Partition.DeleteRecords.
type DeleteResult struct {
	// LowWatermark is the lowest log start offset over the live
	// replicas when the request completed (-1 on error).
	LowWatermark int64
	// Err is nil, or a kerr error: OFFSET_OUT_OF_RANGE (above the HW),
	// NOT_LEADER_OR_FOLLOWER (not leading, or leadership lost while
	// waiting), REQUEST_TIMED_OUT (the replicas did not follow before
	// deadline) or KAFKA_STORAGE_ERROR.
	Err error
}

// DeleteRecords raises the log start offset to offset (at most the high
// watermark) and answers on the returned channel once every live replica
// has, or at deadline.
func (p *Partition) DeleteRecords(offset int64, deadline time.Time) <-chan DeleteResult {
	ch := make(chan DeleteResult, 1)
	p.do(func() {
		if p.closed {
			ch <- DeleteResult{LowWatermark: -1, Err: kerr.NotLeaderForPartition}
			return
		}
		p.nextID++
		id := p.nextID
		p.deleteWaiters[id] = ch
		p.r.DeleteRecords(replica.DeleteRecordsRequest{ID: id, Offset: offset, DeadlineMs: deadline.UnixMilli()})
	})
	p.wake()
	return ch
}

// answerDeletes hands the machine's completed DeleteRecords to their
// waiters (by the owner, from processReady).
func (p *Partition) answerDeletes(done []replica.DeleteRecordsResult) {
	for _, d := range done {
		ch, ok := p.deleteWaiters[d.ID]
		if !ok {
			continue
		}
		delete(p.deleteWaiters, d.ID)
		res := DeleteResult{LowWatermark: d.LowWatermark}
		if d.Error != 0 {
			res.Err = kerr.ErrorForCode(d.Error)
		}
		ch <- res
	}
}
