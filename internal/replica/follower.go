package replica

import "github.com/sluice-io/sluice/internal/epoch"

// FetchRequest returns the next fetch a follower should send to its leader,
// or false when there is nothing to send: not a follower, no leader, or
// appended data not yet flushed.
//
// Durability (the durability rule, docs/architecture.md): a follower's fetch offset is its
// acknowledgement, and the leader counts it toward the HW. So the follower
// only fetches once everything it has appended is flushed; the fetch offset
// it sends is then both its LEO and its flushed offset, and the wire format
// stays Kafka's. The cost is one fsync per replication round-trip, which
// group commit amortises across partitions and batches. With a no-fsync
// policy the driver calls Flushed right after each append.
func (r *Replica) FetchRequest() (FetchRequest, bool) {
	if r.role != RoleFollower || r.leader < 0 || r.flushed < r.leo || r.storageFailed {
		return FetchRequest{}, false
	}
	return FetchRequest{
		Leader:             r.leader,
		ReplicaID:          r.cfg.ID,
		BrokerEpoch:        r.cfg.BrokerEpoch,
		CurrentLeaderEpoch: r.leaderEpoch,
		FetchOffset:        r.leo,
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
