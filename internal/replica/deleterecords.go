package replica

// DeleteRecords (KIP-107) on a leader: the log start offset is raised at
// once, and the answer waits until every live replica has raised its own
// (the low watermark, LowWatermark, has reached the offset), as Kafka's
// DelayedDeleteRecords waits in the purgatory. A follower learns the
// leader's log start from its fetch responses and reports its own in its
// next fetch; answering before that would let a new leader that had not
// learnt it serve the deleted records again.

// maxPendingDeletes bounds the DeleteRecords waiting on one partition;
// more are refused with REQUEST_TIMED_OUT at once.
const maxPendingDeletes = 1024

// DeleteRecordsRequest is one partition's part of a DeleteRecords request,
// on its leader.
type DeleteRecordsRequest struct {
	// ID is an opaque handle returned in the DeleteRecordsResult.
	ID uint64
	// Offset is the new log start; above the HW it is refused.
	Offset int64
	// DeadlineMs is when the request fails with REQUEST_TIMED_OUT if the
	// live replicas have not all raised their log start to Offset.
	DeadlineMs int64
}

// DeleteRecordsResult completes a DeleteRecordsRequest (Ready.Deleted).
type DeleteRecordsResult struct {
	ID uint64
	// LowWatermark is the lowest log start over the live replicas when
	// the request completed (-1 on error).
	LowWatermark int64
	// Error is ErrNone, ErrOffsetOutOfRange (above the HW),
	// ErrNotLeaderOrFollower (not leading, or leadership lost while
	// waiting), ErrRequestTimedOut (the replicas did not follow before the
	// deadline, or too many are waiting) or ErrKafkaStorageError.
	Error int16
}

type pendingDelete struct {
	id       uint64
	offset   int64
	deadline int64
}

// DeleteRecords raises the log start to req.Offset (leader only) and
// completes the request in Ready.Deleted once the low watermark reaches
// it, or at its deadline; an invalid one completes at once with its error.
func (r *Replica) DeleteRecords(req DeleteRecordsRequest) {
	code := ErrNone
	switch {
	case r.storageFailed:
		code = ErrKafkaStorageError
	case r.role != RoleLeader:
		code = ErrNotLeaderOrFollower
	case req.Offset > r.hw:
		code = ErrOffsetOutOfRange
	case len(r.deletes) >= maxPendingDeletes:
		code = ErrRequestTimedOut
	}
	if code != ErrNone {
		r.rd.Deleted = append(r.rd.Deleted, DeleteRecordsResult{ID: req.ID, LowWatermark: -1, Error: code})
		return
	}
	r.AdvanceLogStart(req.Offset)
	r.deletes = append(r.deletes, pendingDelete{id: req.ID, offset: req.Offset, deadline: req.DeadlineMs})
	r.checkDeletes()
}

// PendingDeletes is the number of DeleteRecords waiting for the replicas.
func (r *Replica) PendingDeletes() int { return len(r.deletes) }

// checkDeletes completes the DeleteRecords the low watermark has reached
// and fails the rest once expired, or all of them when not leading. Run
// after every event that moves the low watermark, the clock or the role.
func (r *Replica) checkDeletes() {
	if len(r.deletes) == 0 {
		return
	}
	lw := r.LowWatermark()
	if r.cfg.AnswerDeleteRecordsEarly {
		lw = r.logStart
	}
	kept := r.deletes[:0]
	for _, d := range r.deletes {
		res := DeleteRecordsResult{ID: d.id, LowWatermark: -1}
		switch {
		case r.storageFailed:
			res.Error = ErrKafkaStorageError
		case r.role != RoleLeader:
			res.Error = ErrNotLeaderOrFollower
		case lw >= d.offset:
			res.LowWatermark = lw
		case r.now >= d.deadline:
			res.Error = ErrRequestTimedOut
		default:
			kept = append(kept, d)
			continue
		}
		r.rd.Deleted = append(r.rd.Deleted, res)
	}
	clear(r.deletes[len(kept):])
	r.deletes = kept
}
