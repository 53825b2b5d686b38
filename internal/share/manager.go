package share

import (
	"context"
	"sync"
)

// Manager holds the share partitions this broker leads (Kafka's
// SharePartitionManager's cache), loading each from the Persister on
// first use and again when the partition's leader epoch changes. Safe for
// concurrent use.
type Manager struct {
	persister Persister
	mu        sync.Mutex
	parts     map[Key]*Partition
	// loading serializes the loads of one key.
	loading map[Key]*sync.Mutex
	knobs   Knobs
}

// SetKnobs sets the knobs of the partitions loaded from now on (tests).
func (m *Manager) SetKnobs(k Knobs) {
	m.mu.Lock()
	m.knobs = k
	m.mu.Unlock()
}

// NewManager returns a Manager over p.
func NewManager(p Persister) *Manager {
	return &Manager{persister: p, parts: map[Key]*Partition{}, loading: map[Key]*sync.Mutex{}}
}

// Persister returns the manager's persister.
func (m *Manager) Persister() Persister { return m.persister }

// Get returns key's share partition for the leader of leaderEpoch, loading
// it (Load) if it is not held or was loaded in another leader epoch.
// cfg replaces the settings of a held partition.
func (m *Manager) Get(ctx context.Context, key Key, leaderEpoch int32, cfg Config, resetOffset func() (int64, error)) (*Partition, error) {
	m.mu.Lock()
	if sp := m.parts[key]; sp != nil && sp.leaderEpoch == leaderEpoch {
		m.mu.Unlock()
		sp.SetConfig(cfg)
		return sp, nil
	}
	lk := m.loading[key]
	if lk == nil {
		lk = &sync.Mutex{}
		m.loading[key] = lk
	}
	m.mu.Unlock()
	lk.Lock()
	defer lk.Unlock()
	m.mu.Lock()
	if sp := m.parts[key]; sp != nil && sp.leaderEpoch == leaderEpoch {
		m.mu.Unlock()
		sp.SetConfig(cfg)
		return sp, nil
	}
	m.mu.Unlock()
	sp, err := Load(ctx, m.persister, key, leaderEpoch, cfg, resetOffset)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	sp.knobs = m.knobs
	m.parts[key] = sp
	m.mu.Unlock()
	return sp, nil
}

// Held returns key's share partition if it is loaded.
func (m *Manager) Held(key Key) *Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[key]
}

// Drop forgets key's share partition (its writes were fenced); the next
// Get loads it again.
func (m *Manager) Drop(key Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.parts, key)
}

// Len is the number of loaded share partitions.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.parts)
}
