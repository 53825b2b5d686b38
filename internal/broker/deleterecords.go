package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/replica"
)

// DeleteRecords (KIP-107) on a leader: the log start offset is raised at
// once, and the answer waits until every live replica has raised its own
// (the low watermark, replica.Replica.LowWatermark, has reached the
// offset), as Kafka's DelayedDeleteRecords waits in the purgatory. A
// follower learns the leader's log start from its fetch responses and
// reports its own in its next fetch; answering before that would let a new
// leader that had not learnt it serve the deleted records again.

// maxPendingDeletes bounds the DeleteRecords waiting on one partition;
// more are refused with REQUEST_TIMED_OUT at once.
const maxPendingDeletes = 1024

// DeleteResult is the outcome of Partition.DeleteRecords.
type DeleteResult struct {
	// LowWatermark is the lowest log start offset over the live
	// replicas when the request completed (-1 on error).
	LowWatermark int64
	// Err is nil, or a kerr error: OFFSET_OUT_OF_RANGE (above the HW),
	// NOT_LEADER_OR_FOLLOWER (not leading, or leadership lost while
	// waiting) or REQUEST_TIMED_OUT (the replicas did not follow before
	// deadline).
	Err error
}

type deleteWaiter struct {
	offset   int64
	deadline time.Time
	ch       chan DeleteResult // buffered
}

// DeleteRecords raises the log start offset to offset (at most the high
// watermark) and answers on the returned channel once every live replica
// has, or at deadline.
func (p *Partition) DeleteRecords(offset int64, deadline time.Time) <-chan DeleteResult {
	ch := make(chan DeleteResult, 1)
	p.do(func() {
		err := error(kerr.RequestTimedOut)
		if len(p.deletes) < maxPendingDeletes {
			err = p.raiseLogStart(offset)
		}
		if err != nil {
			ch <- DeleteResult{LowWatermark: -1, Err: err}
			return
		}
		p.deletes = append(p.deletes, deleteWaiter{offset: offset, deadline: deadline, ch: ch})
	})
	p.wake()
	return ch
}

// checkDeletes answers the DeleteRecords the low watermark has reached,
// fails the rest once expired or when not leading (by the owner).
func (p *Partition) checkDeletes() {
	if len(p.deletes) == 0 {
		return
	}
	lw := p.r.LowWatermark()
	if p.b.knobs.AnswerDeleteRecordsEarly {
		lw = p.r.LogStart()
	}
	leading := !p.closed && p.r.Role() == replica.RoleLeader
	now := p.b.now()
	kept := p.deletes[:0]
	for _, d := range p.deletes {
		switch {
		case !leading:
			d.ch <- DeleteResult{LowWatermark: -1, Err: kerr.NotLeaderForPartition}
		case lw >= d.offset:
			d.ch <- DeleteResult{LowWatermark: lw}
		case !now.Before(d.deadline):
			d.ch <- DeleteResult{LowWatermark: -1, Err: kerr.RequestTimedOut}
		default:
			kept = append(kept, d)
		}
	}
	clear(p.deletes[len(kept):])
	p.deletes = kept
}
