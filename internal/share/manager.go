package share

import (
	"bytes"
	"context"
	"sort"
	"sync"
	"time"
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

// Holds reports whether key's share partition is loaded for the leader of
// leaderEpoch: Get would not load it.
func (m *Manager) Holds(key Key, leaderEpoch int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.parts[key]
	return sp != nil && sp.leaderEpoch == leaderEpoch
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

// PartitionStatus is one loaded share partition as the status pages show
// it.
type PartitionStatus struct {
	// Key names the share partition.
	Key Key
	// Start and End are SPSO and SPEO.
	Start, End int64
	// Acquired counts the records locked for a member (their lock not
	// passed), Completed the acknowledged and archived records of the
	// window.
	Acquired, Completed int
}

// Statuses returns the loaded share partitions as of now, sorted by
// group, topic id and partition.
func (m *Manager) Statuses(now time.Time) []PartitionStatus {
	m.mu.Lock()
	parts := make([]*Partition, 0, len(m.parts))
	for _, sp := range m.parts {
		parts = append(parts, sp)
	}
	m.mu.Unlock()
	out := make([]PartitionStatus, 0, len(parts))
	for _, sp := range parts {
		out = append(out, sp.Status(now))
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Key, out[j].Key
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
			return c < 0
		}
		return a.Partition < b.Partition
	})
	return out
}

// Status returns the partition's PartitionStatus as of now, without
// changing it (locks that passed are not counted as acquired).
func (sp *Partition) Status(now time.Time) PartitionStatus {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	st := PartitionStatus{Key: sp.key, Start: sp.start, End: sp.end()}
	for _, r := range sp.recs {
		switch {
		case r.state == Acquired && now.Before(r.deadline):
			st.Acquired++
		case r.state == Acknowledged || r.state == Archived:
			st.Completed++
		}
	}
	return st
}
