package replica

import (
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
)

// The follower's path into tiered storage (KIP-405). A follower whose
// fetch offset is below the leader's local log start gets
// OFFSET_MOVED_TO_TIERED_STORAGE (the leader's driver answers it when the
// read of its log says the offset is in the remote log). The driver then
// does what Kafka's ReplicaFetcherTierStateMachine does: asks the leader
// for its earliest local offset (ListOffsets -4) and log start (-2),
// reads the leader-epoch checkpoint and producer snapshot of the remote
// segment ending just below that local start, and hands them to
// HandleRemoteAux, which decides whether to restart the log there
// (buildRemoteLogAuxState): instead of copying the whole log, the
// follower fetches on from the leader's local start.

// RemoteAux is the state a follower rebuilds its log from when its fetch
// offset moved to the remote log.
type RemoteAux struct {
	// LocalStart is the leader's local log start (ListOffsets -4): the
	// follower's new log end.
	LocalStart int64
	// LogStart is the leader's log start (ListOffsets -2), at or below
	// LocalStart: the follower's new log start.
	LogStart int64
	// Epochs is the remote segment's leader-epoch checkpoint, Producers
	// its producer snapshot (nil: empty), both as of the segment's end.
	Epochs    []epoch.Entry
	Producers *producer.State
}

// HandleRemoteAux applies aux, gathered by the driver for req (a fetch
// the leader answered with OFFSET_MOVED_TO_TIERED_STORAGE): if req is
// still this follower's current fetch and aux's local start is past its
// log end, the log is emptied and restarts at aux.LocalStart with its log
// start at aux.LogStart, the epoch cache and producer state those of the
// remote segment, and the HW at the new log end (Kafka's
// buildRemoteLogAuxState: truncateFullyAndStartAt, then the log start,
// the epochs and the producer snapshot). It reports whether it did; a
// stale or useless aux (the leader moved on, or its local log now holds
// this follower's fetch offset) is ignored and the next fetch asks again.
func (r *Replica) HandleRemoteAux(req FetchRequest, aux RemoteAux) bool {
	if r.role != RoleFollower || req.CurrentLeaderEpoch != r.leaderEpoch ||
		req.Leader != r.leader || req.FetchOffset != r.leo {
		return false
	}
	if aux.LocalStart <= r.leo || aux.LogStart < 0 || aux.LogStart > aux.LocalStart {
		return false
	}
	r.truncateFullyAndStartAt(aux.LocalStart)
	r.rd.Truncate.Tiered, r.rd.Truncate.LogStart = true, aux.LogStart
	r.logStart = aux.LogStart
	r.rd.LogStart = aux.LogStart
	// The checkpoint as of the segment's end: nothing at or past the new
	// log end.
	c := epoch.New(append([]epoch.Entry(nil), aux.Epochs...))
	c.TruncateFromEnd(aux.LocalStart)
	r.epochs = c
	r.epochsChanged = true
	if aux.Producers != nil {
		r.producers = aux.Producers.Clone()
	}
	r.moreAtLeader = true
	return true
}
