// Package fetchsession implements incremental fetch sessions (KIP-227): the
// leader's bounded session cache (Kafka's FetchSessionCache, FetchSession
// and CachedPartition) and the fetcher's side (Kafka's FetchSessionHandler,
// client.go). It is pure logic: no I/O, the clock and the session-id source
// are injected, and a mutex makes the cache safe for concurrent requests.
//
// A session remembers, per partition, what the fetcher last asked (fetch
// offset, partition max bytes, its log start, leader epochs) and what the
// leader last sent (high watermark, last stable offset, log start). An
// incremental fetch names only partitions whose request changed, and its
// response carries only partitions with records, errors, a divergence or a
// changed high watermark, last stable offset or log start.
package fetchsession

import (
	"container/list"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka's defaults.
const (
	// DefaultSlots is max.incremental.fetch.session.cache.slots' default.
	DefaultSlots = 1000
	// DefaultEvictionAge is Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
	// (a constant in Kafka, not a setting): a session unused this long may
	// be evicted by any newcomer, and a session younger than this may only
	// be evicted by a privileged (follower) newcomer when it is a
	// consumer's.
	DefaultEvictionAge = 120 * time.Second
	// DefaultMaxPartitions bounds the partitions of one session (sluice's
	// limit; Kafka has none). It is the cluster's partition limit, so a
	// follower of every partition still fits in one session.
	DefaultMaxPartitions = 100_000
)

// Key names one partition of a session: by topic id in sessions of Fetch
// v13+ (KIP-516, Topic empty), by topic name before (TopicID zero).
type Key struct {
	TopicID   [16]byte
	Topic     string
	Partition int32
}

// Request is what the fetcher asks of one partition (CachedPartition's
// request side).
type Request struct {
	FetchOffset int64
	// LogStartOffset is the fetcher's own log start (followers; -1 for
	// consumers).
	LogStartOffset     int64
	MaxBytes           int32
	CurrentLeaderEpoch int32
	LastFetchedEpoch   int32
	// Unflushed is a follower's offsets below FetchOffset not flushed yet
	// (replica.FetchRequest.Unflushed; 0 for consumers).
	Unflushed int64
}

// Result is one partition's answer as read for a response.
type Result struct {
	Error                                           int16
	HighWatermark, LastStableOffset, LogStartOffset int64
	// Records is set when the answer carries record bytes.
	Records bool
	// Diverging is set when the answer carries a DivergingEpoch.
	Diverging bool
	// PreferredReadReplica is set when the answer names one (KIP-392).
	PreferredReadReplica bool
	// TombstoneBound is what a follower's answer carries in a tagged field
	// (0 for consumers): a change goes out like a new high watermark.
	TombstoneBound int64
}

// Entry is one partition of a session: its key, the request parameters
// cached for it and, for a new session, its first answer.
type Entry struct {
	Key
	Request
	Result Result
}

// sent is what the leader last sent of a partition (CachedPartition's
// response side). hw -1 after an error makes the next answer go out.
type sent struct {
	hw, lso, logStart, tombstoneBound int64
}

type cached struct {
	key  Key
	req  Request
	sent sent
}

// Config configures a Cache.
type Config struct {
	// Slots is max.incremental.fetch.session.cache.slots: the most
	// sessions at once. 0 disables sessions.
	Slots int
	// MaxPartitions bounds one session's partitions (DefaultMaxPartitions
	// if 0). A full fetch naming more gets no session; an incremental one
	// growing the session past it closes the session.
	MaxPartitions int
	// EvictionAge is DefaultEvictionAge if 0.
	EvictionAge time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// NewID returns a candidate session id; ids that are not positive or
	// are in use are drawn again. Default: uniform in [1, MaxInt32).
	NewID func() int32
}

// Cache is the leader's session cache (Kafka's FetchSessionCache).
type Cache struct {
	cfg Config

	mu         sync.Mutex
	sessions   map[int32]*session
	partitions int   // cached partitions over all sessions
	evictions  int64 // sessions evicted to make room
}

type session struct {
	id         int32
	privileged bool // created by a follower (ReplicaID >= 0)
	usesIDs    bool // Fetch v13+
	epoch      int32
	created    time.Time
	lastUsed   time.Time
	// parts in response order: partitions that returned records move to
	// the back, so others get the response budget next time (Kafka's
	// PartitionIterator).
	order *list.List // of *cached
	parts map[Key]*list.Element
}

// New returns an empty cache.
func New(cfg Config) *Cache {
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = DefaultMaxPartitions
	}
	if cfg.EvictionAge <= 0 {
		cfg.EvictionAge = DefaultEvictionAge
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = func() int32 { return 1 + rand.Int32N(math.MaxInt32-1) }
	}
	return &Cache{cfg: cfg, sessions: map[int32]*session{}}
}

// NextEpoch is Kafka's FetchMetadata.nextEpoch: epochs run 1, 2, ...,
// MaxInt32, then wrap to 1.
func NextEpoch(e int32) int32 {
	if e < 0 {
		return -1
	}
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// Stats are the cache's gauges and counters (Kafka's
// NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached,
// IncrementalFetchSessionEvictionsPerSec).
type Stats struct {
	Sessions, Partitions int
	Evictions            int64
}

// Stats returns the current sizes and the evictions so far.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Sessions: len(c.sessions), Partitions: c.partitions, Evictions: c.evictions}
}

// Remove closes a session (a full fetch naming it, or epoch -1). It reports
// whether the session existed.
func (c *Cache) Remove(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	if s == nil {
		return false
	}
	c.remove(s)
	return true
}

func (c *Cache) remove(s *session) {
	delete(c.sessions, s.id)
	c.partitions -= len(s.parts)
}

// Create makes a session for a full fetch's answer (Kafka's
// FullFetchContext.updateAndGenerateResponseData and
// FetchSessionCache.maybeCreateSession), evicting another if the cache is
// full and one may go. It returns the new session's id, or 0 when no
// session was created (the client keeps sending full fetches).
func (c *Cache) Create(privileged, usesIDs bool, entries []Entry) int32 {
	if c.cfg.Slots <= 0 || len(entries) == 0 || len(entries) > c.cfg.MaxPartitions {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	if len(c.sessions) >= c.cfg.Slots && !c.tryEvict(privileged, len(entries), now) {
		return 0
	}
	id := c.cfg.NewID()
	for id <= 0 || c.sessions[id] != nil {
		id = c.cfg.NewID()
	}
	s := &session{id: id, privileged: privileged, usesIDs: usesIDs, epoch: NextEpoch(0),
		created: now, lastUsed: now, order: list.New(), parts: make(map[Key]*list.Element, len(entries))}
	for _, e := range entries {
		k := normalize(e.Key, usesIDs)
		cp := &cached{key: k, req: e.Request}
		cp.sent.record(e.Result)
		if el, ok := s.parts[k]; ok {
			el.Value = cp // a partition named twice: the last one counts
			continue
		}
		s.parts[k] = s.order.PushBack(cp)
	}
	c.sessions[id] = s
	c.partitions += len(s.parts)
	return id
}

// normalize keys id sessions by id alone and name sessions by name alone.
func normalize(k Key, usesIDs bool) Key {
	if usesIDs {
		k.Topic = ""
	} else {
		k.TopicID = [16]byte{}
	}
	return k
}

// tryEvict is FetchSessionCache.tryEvict: a newcomer may evict the least
// recently used session if it has been idle longer than EvictionAge;
// otherwise the least valuable evictable session (Kafka's EvictableKey
// order: consumers before followers, then fewer partitions, then lower
// id) if the newcomer is worth more (a follower over a consumer, or more
// partitions). Consumer sessions are evictable by followers at once, and
// every session by anyone once older than EvictionAge. Kafka decides
// evictability when a session is touched; sluice decides it now.
func (c *Cache) tryEvict(privileged bool, size int, now time.Time) bool {
	var lru, victim *session
	for _, s := range c.sessions {
		if lru == nil || s.lastUsed.Before(lru.lastUsed) || (s.lastUsed.Equal(lru.lastUsed) && s.id < lru.id) {
			lru = s
		}
		old := now.Sub(s.created) > c.cfg.EvictionAge
		if !old && (!privileged || s.privileged) {
			continue
		}
		if victim == nil || lessValuable(s, victim) {
			victim = s
		}
	}
	if lru == nil {
		return false
	}
	if now.Sub(lru.lastUsed) > c.cfg.EvictionAge {
		c.remove(lru)
		c.evictions++
		return true
	}
	if victim == nil {
		return false
	}
	// The newcomer's key is (privileged, size, id 0): it wins over an
	// equal-sized session of the same kind only by having more partitions.
	if privileged != victim.privileged {
		if !privileged {
			return false
		}
	} else if size <= len(victim.parts) {
		return false
	}
	c.remove(victim)
	c.evictions++
	return true
}

func lessValuable(a, b *session) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	if len(a.parts) != len(b.parts) {
		return len(a.parts) < len(b.parts)
	}
	return a.id < b.id
}

// Txn is one incremental fetch in progress: the session's partitions as of
// the request, to be read, and Commit to record what the response sends.
type Txn struct {
	c     *Cache
	s     *session
	epoch int32 // the session's epoch once this request was accepted
	parts []*cached
}

// Incremental starts an incremental fetch (Kafka's FetchManager.newContext
// for a non-full request and FetchSession.update): it checks the session
// and its epoch, applies the request's added or changed partitions and
// forgotten ones, and advances the epoch. The error code is
// FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or
// FETCH_SESSION_TOPIC_ID_ERROR (a v13+ request on a name session or the
// reverse); FETCH_SESSION_ID_NOT_FOUND also when the session would grow
// past MaxPartitions (it is closed). A nil Txn with no error means the
// session became empty and was closed: answer sessionless (Kafka's
// SessionlessFetchContext).
func (c *Cache) Incremental(id, epoch int32, usesIDs bool, updates []Entry, forget []Key) (*Txn, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	switch {
	case s == nil:
		return nil, kerr.FetchSessionIDNotFound.Code
	case s.epoch != epoch:
		return nil, kerr.InvalidFetchSessionEpoch.Code
	case s.usesIDs != usesIDs:
		return nil, kerr.FetchSessionTopicIDError.Code
	}
	before := len(s.parts)
	for _, u := range updates {
		k := normalize(u.Key, usesIDs)
		if el, ok := s.parts[k]; ok {
			el.Value.(*cached).req = u.Request
			continue
		}
		s.parts[k] = s.order.PushBack(&cached{key: k, req: u.Request, sent: sent{hw: -1, lso: -1, logStart: -1}})
	}
	for _, k := range forget {
		k = normalize(k, usesIDs)
		if el, ok := s.parts[k]; ok {
			s.order.Remove(el)
			delete(s.parts, k)
		}
	}
	c.partitions += len(s.parts) - before
	if len(s.parts) > c.cfg.MaxPartitions {
		c.remove(s)
		return nil, kerr.FetchSessionIDNotFound.Code
	}
	if len(s.parts) == 0 {
		c.remove(s)
		return nil, 0
	}
	s.lastUsed = c.cfg.Now()
	s.epoch = NextEpoch(s.epoch)
	t := &Txn{c: c, s: s, epoch: s.epoch, parts: make([]*cached, 0, len(s.parts))}
	for el := s.order.Front(); el != nil; el = el.Next() {
		cp := *el.Value.(*cached)
		t.parts = append(t.parts, &cp)
	}
	return t, 0
}

// ID is the session's id.
func (t *Txn) ID() int32 { return t.s.id }

// Current reports whether the session is still open at this request's
// epoch, as Commit requires; a throttled response, which commits
// nothing, checks it (Kafka's IncrementalFetchContext.getThrottledResponse).
func (t *Txn) Current() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.sessions[t.s.id] == t.s && t.s.epoch == t.epoch
}

// Len is the number of partitions to read.
func (t *Txn) Len() int { return len(t.parts) }

// Partition returns the i-th partition to read and its cached request.
func (t *Txn) Partition(i int) (Key, Request) { return t.parts[i].key, t.parts[i].req }

// MustRespond reports whether the i-th partition's answer r goes into the
// response (Kafka's CachedPartition.maybeUpdateResponseData): records,
// an error, a divergence or a preferred read replica, or a high
// watermark, last stable offset or log start other than last sent. It
// changes nothing: Commit records what is finally sent.
func (t *Txn) MustRespond(i int, r Result) bool {
	return t.parts[i].sent.mustRespond(r)
}

func (st sent) mustRespond(r Result) bool {
	return r.Records || r.Error != 0 || r.Diverging || r.PreferredReadReplica ||
		st.hw != r.HighWatermark || st.lso != r.LastStableOffset || st.logStart != r.LogStartOffset ||
		st.tombstoneBound != r.TombstoneBound
}

func (st *sent) record(r Result) {
	st.hw, st.lso, st.logStart, st.tombstoneBound = r.HighWatermark, r.LastStableOffset, r.LogStartOffset, r.TombstoneBound
	if r.Error != 0 {
		st.hw = -1 // resend once the error clears
	}
}

// Commit records the answers of the response actually sent (results[i]
// answers Partition(i)) and reports which partitions it includes. ok is
// false when the session was closed, evicted or used by another request
// since Incremental (Kafka answers INVALID_FETCH_SESSION_EPOCH then);
// nothing is recorded.
func (t *Txn) Commit(results []Result) (include []bool, ok bool) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[t.s.id] != t.s || t.s.epoch != t.epoch {
		return nil, false
	}
	include = make([]bool, len(t.parts))
	var moved []*list.Element
	for i, p := range t.parts {
		if i >= len(results) {
			break
		}
		r := results[i]
		if !p.sent.mustRespond(r) {
			continue
		}
		include[i] = true
		el, ok := t.s.parts[p.key]
		if !ok {
			continue
		}
		cp := el.Value.(*cached)
		cp.sent.record(r)
		if r.Records {
			moved = append(moved, el)
		}
	}
	for _, el := range moved {
		t.s.order.MoveToBack(el)
	}
	return include, true
}
