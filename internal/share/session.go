package share

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Share session epochs (Kafka's ShareRequestMetadata).
const (
	// InitialEpoch opens a share session (ShareFetch only).
	InitialEpoch int32 = 0
	// FinalEpoch closes the share session after the request's
	// acknowledgements.
	FinalEpoch int32 = -1
)

// DefaultMaxSessions is group.share.max.share.sessions.
const DefaultMaxSessions = 2000

// TopicPartition names a partition of a share session by topic id.
type TopicPartition struct {
	// TopicID is the topic's id.
	TopicID [16]byte
	// Partition is the partition index.
	Partition int32
}

// SessionKey names a share session: one member of one share group
// (Kafka's ShareSessionKey).
type SessionKey struct {
	// Group is the share group id.
	Group string
	// Member is the member id.
	Member string
}

// session is one share session: the partitions the member fetches and
// the epoch its next request must carry.
type session struct {
	epoch int32
	parts []TopicPartition
	conn  any
}

// Sessions is the broker's share-session cache (Kafka's
// ShareSessionCache): at most Max sessions, each tied to the connection
// that opened it, removed when that connection closes. Safe for
// concurrent use.
type Sessions struct {
	mu     sync.Mutex
	max    int
	byKey  map[SessionKey]*session
	byConn map[any]map[SessionKey]struct{}
}

// NewSessions returns an empty cache of at most max sessions
// (DefaultMaxSessions if max <= 0).
func NewSessions(max int) *Sessions {
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return &Sessions{max: max, byKey: map[SessionKey]*session{}, byConn: map[any]map[SessionKey]struct{}{}}
}

// Len is the number of open sessions.
func (c *Sessions) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// nextEpoch is the epoch after e, wrapping to 1 (Kafka's
// ShareRequestMetadata.nextEpoch).
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// FetchResult is what a ShareFetch does to its session.
type FetchResult struct {
	// Parts are the partitions to fetch (the whole session's after an
	// incremental update; on close, the partitions to release).
	Parts []TopicPartition
	// Full is set for epoch 0 (a new session) and -1 (closing).
	Full bool
	// Closed is set when the session was closed (epoch -1).
	Closed bool
}

// Fetch applies a ShareFetch's session part for key on connection conn
// (Kafka's SharePartitionManager.newContext): epoch 0 replaces any session
// of key with a new one holding adds (SHARE_SESSION_LIMIT_REACHED when the
// cache is full); -1 closes the session, which must exist
// (SHARE_SESSION_NOT_FOUND) and the request may not fetch
// (INVALID_REQUEST); any other epoch must be the session's
// (INVALID_SHARE_SESSION_EPOCH), adds and forgets partitions and moves the
// epoch on. On error nothing changes.
func (c *Sessions) Fetch(key SessionKey, epoch int32, conn any, adds, forgotten []TopicPartition) (FetchResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.byKey[key]
	switch epoch {
	case InitialEpoch:
		if s == nil && len(c.byKey) >= c.max {
			return FetchResult{}, fmt.Errorf("%w: %d share sessions", kerr.ShareSessionLimitReached, len(c.byKey))
		}
		if s != nil {
			c.remove(key, s)
		}
		s = &session{epoch: 1, conn: conn}
		s.parts = addParts(s.parts, adds)
		c.byKey[key] = s
		m := c.byConn[conn]
		if m == nil {
			m = map[SessionKey]struct{}{}
			c.byConn[conn] = m
		}
		m[key] = struct{}{}
		return FetchResult{Parts: append([]TopicPartition(nil), s.parts...), Full: true}, nil
	case FinalEpoch:
		if s == nil {
			return FetchResult{}, kerr.ShareSessionNotFound
		}
		if len(adds) > 0 {
			return FetchResult{}, fmt.Errorf("%w: a closing share fetch names partitions to fetch", kerr.InvalidRequest)
		}
		c.remove(key, s)
		return FetchResult{Parts: s.parts, Full: true, Closed: true}, nil
	}
	if s == nil {
		return FetchResult{}, kerr.ShareSessionNotFound
	}
	if s.epoch != epoch {
		return FetchResult{}, fmt.Errorf("%w: expected %d, got %d", kerr.InvalidShareSessionEpoch, s.epoch, epoch)
	}
	s.parts = addParts(s.parts, adds)
	if len(forgotten) > 0 {
		drop := map[TopicPartition]bool{}
		for _, tp := range forgotten {
			drop[tp] = true
		}
		kept := s.parts[:0]
		for _, tp := range s.parts {
			if !drop[tp] {
				kept = append(kept, tp)
			}
		}
		s.parts = kept
	}
	s.epoch = nextEpoch(s.epoch)
	return FetchResult{Parts: append([]TopicPartition(nil), s.parts...)}, nil
}

// Acknowledge applies a ShareAcknowledge's session part: epoch 0 is
// INVALID_SHARE_SESSION_EPOCH (only ShareFetch opens sessions), -1 closes
// the session and returns its partitions, any other must be the session's
// and moves it on. closed reports a close.
func (c *Sessions) Acknowledge(key SessionKey, epoch int32) (parts []TopicPartition, closed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch == InitialEpoch {
		return nil, false, fmt.Errorf("%w: ShareAcknowledge cannot open a share session", kerr.InvalidShareSessionEpoch)
	}
	s := c.byKey[key]
	if s == nil {
		return nil, false, kerr.ShareSessionNotFound
	}
	if epoch == FinalEpoch {
		c.remove(key, s)
		return s.parts, true, nil
	}
	if s.epoch != epoch {
		return nil, false, fmt.Errorf("%w: expected %d, got %d", kerr.InvalidShareSessionEpoch, s.epoch, epoch)
	}
	s.epoch = nextEpoch(s.epoch)
	return nil, false, nil
}

// Closed is a session removed because its connection closed.
type Closed struct {
	// Key is the session's key.
	Key SessionKey
	// Parts are its partitions, whose locks of Key.Member are released.
	Parts []TopicPartition
}

// ConnClosed removes the sessions opened on conn and returns them (Kafka's
// ShareSessionCache connection disconnect listener).
func (c *Sessions) ConnClosed(conn any) []Closed {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Closed
	for key := range c.byConn[conn] {
		if s := c.byKey[key]; s != nil && s.conn == conn {
			out = append(out, Closed{Key: key, Parts: s.parts})
			delete(c.byKey, key)
		}
	}
	delete(c.byConn, conn)
	return out
}

func (c *Sessions) remove(key SessionKey, s *session) {
	delete(c.byKey, key)
	if m := c.byConn[s.conn]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(c.byConn, s.conn)
		}
	}
}

// addParts appends the partitions of adds not already in parts.
func addParts(parts, adds []TopicPartition) []TopicPartition {
	if len(adds) == 0 {
		return parts
	}
	have := make(map[TopicPartition]bool, len(parts)+len(adds))
	for _, tp := range parts {
		have[tp] = true
	}
	for _, tp := range adds {
		if !have[tp] {
			have[tp] = true
			parts = append(parts, tp)
		}
	}
	return parts
}
