package sharecoord

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/share"
)

// entry is the state of one share partition in a shard. Entries are
// replaced, never changed in place, so that a write's undo restores the
// previous one.
type entry struct {
	st share.State
	// snapshotEpoch is the epoch of the last snapshot record.
	snapshotEpoch int32
	// updates counts the update records since that snapshot.
	updates int
	// created is when the state was first created (ms), carried by
	// every snapshot.
	created int64
	// snapOffset is the offset of the last snapshot record: the
	// records of the key below it are no longer needed.
	snapOffset int64
}

// inflight tracks the uncommitted writes of one key, so that reads
// answer only committed state: a read of a key with writes in flight
// answers once the last of them is committed.
type inflight struct {
	n       int
	waiters []func(error)
	// base is the key's committed entry, from before the first write in
	// flight (nil if it had none): what a rollback returns to, whose
	// records pruning must keep.
	base *entry
}

// State is the state machine of one __share_group_state partition: the
// share partitions whose coordinator key hashes to it. Apply replays a
// record; the coordinator's writes build records with the methods below,
// append them and Apply them in the same event (the runtime undoes them
// if their commit fails), so the live state is always the replay of the
// records written.
type State struct {
	entries map[share.Key]*entry
	pending map[share.Key]*inflight
	// coldBefore is the high watermark at the last prune: a key whose
	// last snapshot is below it had none since (prune.go).
	coldBefore int64
	// snapshotEvery is share.coordinator.snapshot.update.records.per.snapshot.
	snapshotEvery int
}

// NewState returns an empty state that writes a snapshot after every
// snapshotEvery update records of a key.
func NewState(snapshotEvery int) *State {
	return &State{entries: map[share.Key]*entry{}, pending: map[share.Key]*inflight{}, snapshotEvery: max(snapshotEvery, 0)}
}

// Len is the number of share partitions with state.
func (s *State) Len() int { return len(s.entries) }

// Get returns the state of key and whether it has one.
func (s *State) Get(key share.Key) (share.State, bool) {
	e := s.entries[key]
	if e == nil {
		return share.State{}, false
	}
	st := e.st
	st.Batches = append([]share.StateBatch(nil), st.Batches...)
	return st, true
}

// Apply replays one record, as Kafka's ShareCoordinatorShard.replay: a
// snapshot replaces the key's state, an update is merged onto it (its
// batches combined with the state's, its start offset and leader epoch
// taken unless -1), a tombstone removes it.
func (s *State) Apply(r Record) {
	if r.Tombstone {
		delete(s.entries, r.Key)
		return
	}
	cur := s.entries[r.Key]
	if r.Type == TypeSnapshot {
		created := r.CreateTimestamp
		if cur != nil && cur.created != 0 && cur.created < created {
			created = cur.created
		}
		s.entries[r.Key] = &entry{st: share.State{
			StateEpoch: r.StateEpoch, LeaderEpoch: r.LeaderEpoch, StartOffset: r.StartOffset,
			DeliveryCompleteCount: r.DeliveryCompleteCount, Batches: share.Combine(nil, r.Batches, r.StartOffset),
		}, snapshotEpoch: r.SnapshotEpoch, created: created, snapOffset: r.Offset}
		return
	}
	if cur == nil {
		// An update without a snapshot (its snapshot was removed):
		// the update alone is the state.
		cur = &entry{st: share.State{StartOffset: r.StartOffset, LeaderEpoch: -1, DeliveryCompleteCount: -1},
			snapshotEpoch: r.SnapshotEpoch, snapOffset: r.Offset}
	}
	next := *cur
	if r.StartOffset != -1 {
		next.st.StartOffset = r.StartOffset
	}
	if r.LeaderEpoch != -1 {
		next.st.LeaderEpoch = r.LeaderEpoch
	}
	if r.DeliveryCompleteCount != -1 {
		next.st.DeliveryCompleteCount = r.DeliveryCompleteCount
	}
	next.st.Batches = share.Combine(cur.st.Batches, r.Batches, next.st.StartOffset)
	next.updates++
	s.entries[r.Key] = &next
}

// snapshot is a snapshot record of st for key, following cur.
func snapshot(key share.Key, cur *entry, st share.State, now int64) Record {
	r := Record{Type: TypeSnapshot, Key: key, StateEpoch: st.StateEpoch, LeaderEpoch: st.LeaderEpoch,
		StartOffset: st.StartOffset, DeliveryCompleteCount: st.DeliveryCompleteCount,
		CreateTimestamp: now, WriteTimestamp: now, Batches: st.Batches}
	if cur != nil {
		r.SnapshotEpoch = cur.snapshotEpoch + 1
		if cur.created != 0 {
			r.CreateTimestamp = cur.created
		}
	}
	return r
}

// InitializeRecords returns the records of InitializeShareGroupState: a
// snapshot at stateEpoch and startOffset with no batches. FENCED_STATE_EPOCH
// if the key's state epoch is newer.
func (s *State) InitializeRecords(key share.Key, stateEpoch int32, startOffset int64, now int64) ([]Record, *kerr.Error) {
	cur := s.entries[key]
	if cur != nil && stateEpoch < cur.st.StateEpoch {
		return nil, kerr.FencedStateEpoch
	}
	return []Record{snapshot(key, cur, share.State{StateEpoch: stateEpoch, LeaderEpoch: -1, StartOffset: startOffset}, now)}, nil
}

// WriteRecords returns the record of WriteShareGroupState, fenced as Kafka's
// ShareCoordinatorShard.maybeGetWriteStateError: FENCED_LEADER_EPOCH for a
// leader epoch older than the key's, FENCED_STATE_EPOCH for an older state
// epoch. The first write of a key, a write at a newer state epoch, and
// the write after snapshotEvery updates are snapshots (the merged state);
// any other is an update holding the written batches.
func (s *State) WriteRecords(key share.Key, st share.State, now int64) ([]Record, *kerr.Error) {
	cur := s.entries[key]
	if cur != nil && st.LeaderEpoch < cur.st.LeaderEpoch {
		return nil, kerr.FencedLeaderEpoch
	}
	if cur != nil && st.StateEpoch < cur.st.StateEpoch {
		return nil, kerr.FencedStateEpoch
	}
	if cur == nil || st.StateEpoch > cur.st.StateEpoch || cur.updates >= s.snapshotEvery {
		next := st
		if cur != nil && st.StateEpoch == cur.st.StateEpoch {
			if next.StartOffset == -1 {
				next.StartOffset = cur.st.StartOffset
			}
			if next.DeliveryCompleteCount == -1 {
				next.DeliveryCompleteCount = cur.st.DeliveryCompleteCount
			}
			next.Batches = share.Combine(cur.st.Batches, st.Batches, next.StartOffset)
		} else {
			next.Batches = share.Combine(nil, st.Batches, next.StartOffset)
		}
		return []Record{snapshot(key, cur, next, now)}, nil
	}
	start := st.StartOffset
	if start == -1 {
		start = cur.st.StartOffset
	}
	return []Record{{Type: TypeUpdate, Key: key, SnapshotEpoch: cur.snapshotEpoch, LeaderEpoch: st.LeaderEpoch,
		StartOffset: st.StartOffset, DeliveryCompleteCount: st.DeliveryCompleteCount,
		Batches: share.Combine(nil, st.Batches, start)}}, nil
}

// ReadRecords fences a ReadShareGroupState at leaderEpoch
// (FENCED_LEADER_EPOCH if the key's is newer) and returns the update
// record that makes leaderEpoch the key's, if it is newer: Kafka records
// the reader's leader epoch so that writes of an older leader are fenced.
func (s *State) ReadRecords(key share.Key, leaderEpoch int32) ([]Record, *kerr.Error) {
	cur := s.entries[key]
	if cur == nil {
		return nil, nil
	}
	if leaderEpoch < cur.st.LeaderEpoch {
		return nil, kerr.FencedLeaderEpoch
	}
	if leaderEpoch == cur.st.LeaderEpoch {
		return nil, nil
	}
	return []Record{{Type: TypeUpdate, Key: key, SnapshotEpoch: cur.snapshotEpoch, LeaderEpoch: leaderEpoch,
		StartOffset: -1, DeliveryCompleteCount: -1}}, nil
}

// DeleteRecords returns the tombstones of DeleteShareGroupState, none if
// the key has no state.
func (s *State) DeleteRecords(key share.Key) []Record {
	if s.entries[key] == nil {
		return nil
	}
	return []Record{{Type: TypeSnapshot, Key: key, Tombstone: true}, {Type: TypeUpdate, Key: key, Tombstone: true}}
}

// Uninitialized is what Read and ReadSummary answer for a key without
// state.
var Uninitialized = share.State{StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1}
