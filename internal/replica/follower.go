package replica

import "github.com/sluice-io/sluice/internal/epoch"

// FetchRequest returns the next fetch a follower should send to its leader,
// or false when there is nothing to send: not a follower, no leader, or
// appended data not yet flushed and nothing more expected from the leader.
//
// Durability (the durability rule, docs/architecture.md): a follower's
// acknowledgement counts toward the leader's HW only up to what it has
// flushed. The fetch names the follower's LEO as its fetch offset, as in
// Kafka, and how many offsets below it are not flushed yet (Unflushed):
// the leader counts the difference, the flushed offset. So a follower whose
// last answer brought records fetches again at once, while those records
// are being flushed (the flush then covers everything appended meanwhile:
// group commit across fetches); once an answer brings nothing, it waits for
// its flush, and the fetch after it acknowledges everything. With a
// no-fsync policy the driver calls Flushed right after each append.
func (r *Replica) FetchRequest() (FetchRequest, bool) {
	if r.role != RoleFollower || r.leader < 0 || r.storageFailed || (r.flushed < r.leo && !r.moreAtLeader) {
		return FetchRequest{}, false
	}
	return FetchRequest{
		Leader:             r.leader,
		ReplicaID:          r.cfg.ID,
		BrokerEpoch:        r.cfg.BrokerEpoch,
		CurrentLeaderEpoch: r.leaderEpoch,
		FetchOffset:        r.leo,
		Unflushed:          r.leo - r.flushed,
		LastFetchedEpoch:   r.epochs.LatestEpoch(),
		LogStartOffset:     r.logStart,
	}, true
}

// HandleFetchResponse applies a leader's answer to this follower's fetch
// (processPartitionData, docs/kafka-replication.md §1.3). Responses to requests
// other than the current one (another leader epoch or fetch offset) are
// ignored.
func (r *Replica) HandleFetchResponse(resp FetchResponse) {
	if r.role != RoleFollower || resp.Request.CurrentLeaderEpoch != r.leaderEpoch ||
		resp.Request.Leader != r.leader || resp.Request.FetchOffset != r.leo {
		return
	}
	r.moreAtLeader = false
	switch resp.Error {
	case ErrNone:
	case ErrOffsetOutOfRange:
		r.handleOutOfRange(resp.LEO, resp.LogStart)
		return
	default:
		// FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER:
		// the driver backs off until new metadata arrives
		// (docs/kafka-replication.md §5).
		return
	}
	if d := resp.Diverging; d != nil {
		// docs/kafka-replication.md §3.4: truncate and ignore the records and
		// the HW (KAFKA-14704: the HW must not be applied before the
		// truncation).
		r.truncateDiverged(*d)
		return
	}
	for i := range resp.Batches {
		b := &resp.Batches[i]
		if b.BaseOffset < r.leo || b.NumRecords <= 0 {
			break // behind the LEO: drop the rest, refetch from the LEO
		}
		// A batch may start past the LEO: the leader's log is compacted
		// and the offsets between were removed (Kafka's follower append
		// refuses only offsets below its log end).
		r.appendBatch(b) // verbatim: the leader's offsets and epoch (docs/kafka-replication.md §1.3 follower step 2)
		r.moreAtLeader = true
	}
	// Follower HW = min(leader HW, local LEO), monotonic
	// (docs/kafka-replication.md §1.3 step 3).
	if hw := min(resp.HW, r.leo); hw > r.hw {
		r.setHW(hw)
	}
	r.leaderTombstoneBound = resp.TombstoneBound
	// Follower log start follows the leader's, never past the HW
	// (docs/kafka-replication.md §1.3 step 4, §1.1).
	if ls := min(resp.LogStart, r.hw); ls > r.logStart {
		r.logStart = ls
		if r.epochs.TruncateFromStart(ls) {
			r.epochsChanged = true
		}
		r.rd.LogStart, r.rd.LogStartSet = ls, true
	}
}

// NothingFetched tells a follower that the leader's answer to req brought
// nothing for this partition: an incremental fetch session leaves out the
// partitions with nothing new (KIP-227). Like an empty answer, it ends
// pipelining: the next fetch waits for the flush (FetchRequest).
func (r *Replica) NothingFetched(req FetchRequest) {
	if r.role == RoleFollower && req.CurrentLeaderEpoch == r.leaderEpoch && req.Leader == r.leader && req.FetchOffset == r.leo {
		r.moreAtLeader = false
	}
}

// truncateDiverged is getOffsetTruncationState (docs/kafka-replication.md
// §3.4). If the follower never saw the leader's epoch it truncates to the end
// of its own largest earlier epoch; the next fetch carries the new last epoch,
// and rounds repeat until the common point. It never truncates to the HW.
func (r *Replica) truncateDiverged(d DivergingEpoch) {
	fe, fend := r.epochs.EndOffsetFor(d.Epoch, r.leo)
	switch {
	case fe == epoch.Undefined:
		r.truncateTo(min(d.EndOffset, r.leo))
	case fe == d.Epoch:
		r.truncateTo(min(d.EndOffset, fend, r.leo))
	default:
		r.truncateTo(min(fend, r.leo))
	}
}

// handleOutOfRange is fetchOffsetAndTruncate (docs/kafka-replication.md §3.5),
// using the leader's LEO and log start from the response in place of
// ListOffsets round trips.
func (r *Replica) handleOutOfRange(leaderLEO, leaderStart int64) {
	switch {
	case leaderLEO < r.leo:
		// After an unclean election the leader may be behind us.
		r.truncateTo(leaderLEO)
	case leaderStart > r.leo:
		r.truncateFullyAndStartAt(leaderStart)
	}
}
