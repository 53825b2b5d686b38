// Package share holds the pieces of KIP-932 share groups that the share
// partitions (on partition leaders) and the share coordinator (owner of
// __share_group_state) agree on: the durable state of one share partition
// and the Persister that reads and writes it.
package share

import (
	"context"
	"errors"
	"sync"
)

// Key names one share partition: a share group reading one partition of a
// topic. Kafka's SharePartitionKey.
type Key struct {
	// Group is the share group id.
	Group string
	// TopicID is the topic's id.
	TopicID [16]byte
	// Partition is the partition index.
	Partition int32
}

// Delivery states of a persisted state batch, as Kafka's RecordState ids in
// WriteShareGroupState. Acquired records are persisted as Available: a lock
// does not survive a leader change.
const (
	// StateAvailable records may be acquired by a member.
	StateAvailable int8 = 0
	// StateAcknowledged records were accepted by a member.
	StateAcknowledged int8 = 2
	// StateArchived records were rejected or reached the delivery limit.
	StateArchived int8 = 4
)

// StateBatch is one run of offsets [FirstOffset, LastOffset] sharing a
// delivery state and count. Kafka's PersisterStateBatch.
type StateBatch struct {
	// FirstOffset is the first offset of the run, inclusive.
	FirstOffset int64
	// LastOffset is the last offset of the run, inclusive.
	LastOffset int64
	// DeliveryState is one of the State constants.
	DeliveryState int8
	// DeliveryCount is how many times these records were acquired.
	DeliveryCount int16
}

// State is the durable state of one share partition: every offset below
// StartOffset is acknowledged or archived; Batches describe offsets at or
// above it whose state is not Available with delivery count 0.
type State struct {
	// StateEpoch is bumped each time the state is (re)initialized (for
	// example by AlterShareGroupOffsets); writes carrying an older one are
	// fenced with FENCED_STATE_EPOCH.
	StateEpoch int32
	// LeaderEpoch is the partition leader epoch of the writer; writes with
	// an older one are fenced with FENCED_LEADER_EPOCH.
	LeaderEpoch int32
	// StartOffset is the share-partition start offset; -1 when the state was
	// never initialized.
	StartOffset int64
	// DeliveryCompleteCount is how many records at or above StartOffset are
	// acknowledged or archived (WriteShareGroupState v1), -1 if unknown.
	DeliveryCompleteCount int32
	// Batches are the non-trivial runs, sorted and not overlapping.
	Batches []StateBatch
}

// Summary is what ReadShareGroupStateSummary returns.
type Summary struct {
	// StateEpoch is the current state epoch.
	StateEpoch int32
	// LeaderEpoch is the leader epoch of the last writer.
	LeaderEpoch int32
	// StartOffset is the share-partition start offset, -1 if uninitialized.
	StartOffset int64
	// DeliveryCompleteCount is as in State.
	DeliveryCompleteCount int32
}

// Persister stores share partition state durably: Kafka's Persister
// interface, served by the share coordinator through the RPCs
// InitializeShareGroupState (83), ReadShareGroupState (84),
// WriteShareGroupState (85), DeleteShareGroupState (86) and
// ReadShareGroupStateSummary (87). Errors are kerr values
// (FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, COORDINATOR_NOT_AVAILABLE,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...). A nil error from
// Write means the state is durable (committed in __share_group_state).
type Persister interface {
	// Initialize sets the state to an empty one at startOffset with the
	// given state epoch, replacing any previous state.
	Initialize(ctx context.Context, key Key, stateEpoch int32, startOffset int64) error
	// Read returns the state and records leaderEpoch as the reader's, fencing
	// later writes from older leader epochs. An uninitialized partition reads
	// as StartOffset -1 with a nil error.
	Read(ctx context.Context, key Key, leaderEpoch int32) (State, error)
	// Write replaces the state's start offset and merges its batches, fenced
	// by st.StateEpoch and st.LeaderEpoch.
	Write(ctx context.Context, key Key, st State) error
	// Delete removes the state.
	Delete(ctx context.Context, key Key) error
	// ReadSummary returns the summary without fencing.
	ReadSummary(ctx context.Context, key Key) (Summary, error)
}

// ErrFenced is returned by MemPersister for a write from an older state or
// leader epoch. Real persisters return the kerr code instead.
var ErrFenced = errors.New("share: fenced state or leader epoch")

// MemPersister is an in-memory Persister for tests and for a share
// partition without a coordinator. It is safe for concurrent use.
type MemPersister struct {
	mu     sync.Mutex
	states map[Key]State
}

// NewMemPersister returns an empty MemPersister.
func NewMemPersister() *MemPersister { return &MemPersister{states: make(map[Key]State)} }

// Initialize implements Persister.
func (m *MemPersister) Initialize(_ context.Context, key Key, stateEpoch int32, startOffset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[key] = State{StateEpoch: stateEpoch, LeaderEpoch: -1, StartOffset: startOffset, DeliveryCompleteCount: 0}
	return nil
}

// Read implements Persister.
func (m *MemPersister) Read(_ context.Context, key Key, leaderEpoch int32) (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[key]
	if !ok {
		return State{StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1}, nil
	}
	if leaderEpoch > st.LeaderEpoch {
		st.LeaderEpoch = leaderEpoch
		m.states[key] = st
	}
	st.Batches = append([]StateBatch(nil), st.Batches...)
	return st, nil
}

// Write implements Persister. Batches replace the stored ones wholesale:
// callers write their full view of the in-flight window.
func (m *MemPersister) Write(_ context.Context, key Key, st State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.states[key]
	if ok && (st.StateEpoch < cur.StateEpoch || st.LeaderEpoch < cur.LeaderEpoch) {
		return ErrFenced
	}
	st.Batches = append([]StateBatch(nil), st.Batches...)
	m.states[key] = st
	return nil
}

// Delete implements Persister.
func (m *MemPersister) Delete(_ context.Context, key Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, key)
	return nil
}

// ReadSummary implements Persister.
func (m *MemPersister) ReadSummary(_ context.Context, key Key) (Summary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[key]
	if !ok {
		return Summary{StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1}, nil
	}
	return Summary{StateEpoch: st.StateEpoch, LeaderEpoch: st.LeaderEpoch, StartOffset: st.StartOffset, DeliveryCompleteCount: st.DeliveryCompleteCount}, nil
}
