package remote

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// The remote log metadata state machine: Kafka's RemoteLogMetadataCache
// and RemoteLogSegmentState.isValidTransition. A segment enters with
// COPY_SEGMENT_STARTED (a RemoteLogSegmentMetadataRecord) and moves on by
// updates: STARTED → FINISHED or DELETE_SEGMENT_STARTED (a dangling upload
// is cleaned up), FINISHED → DELETE_SEGMENT_STARTED, DELETE_SEGMENT_STARTED
// → DELETE_SEGMENT_FINISHED, after which it is forgotten. A repeat of the
// current state is accepted (Kafka's idempotent self-transition, for
// retries and failover). Anything else is refused.

// ErrIllegalTransition is returned for a state change the state machine
// does not allow.
var ErrIllegalTransition = errors.New("remote: illegal remote segment state transition")

// ErrUnknownSegment is returned for an update of a segment the cache does
// not hold (Kafka's RemoteResourceNotFoundException).
var ErrUnknownSegment = errors.New("remote: unknown remote segment")

// ValidTransition reports whether a segment may move from state from to
// state to (Kafka's RemoteLogSegmentState.isValidTransition); from < 0
// means the segment is new.
func ValidTransition(from, to SegmentState) bool {
	switch {
	case from < 0:
		return to == CopyStarted
	case from == to:
		return from >= CopyStarted && from <= DeleteFinished
	case from == CopyStarted:
		return to == CopyFinished || to == DeleteStarted
	case from == CopyFinished:
		return to == DeleteStarted
	case from == DeleteStarted:
		return to == DeleteFinished
	}
	return false
}

// Cache holds the remote segments of partitions, built from
// __remote_log_metadata records in order. It implements Metadata. Safe for
// concurrent use; the zero value is empty and ready.
type Cache struct {
	mu    sync.RWMutex
	parts map[Partition]*partitionState
}

type partitionState struct {
	segs map[[16]byte]*Segment
	// highest is, per leader epoch, the highest offset of that epoch a
	// COPY_SEGMENT_FINISHED segment held (kept when the segment is later
	// deleted: Kafka's RemoteLogLeaderEpochState.highestLogOffset).
	highest map[int32]int64
	deleted PartitionDeleteState // -1 when not being deleted
}

func (c *Cache) part(p Partition, create bool) *partitionState {
	ps := c.parts[p]
	if ps == nil && create {
		if c.parts == nil {
			c.parts = make(map[Partition]*partitionState)
		}
		ps = &partitionState{segs: map[[16]byte]*Segment{}, highest: map[int32]int64{}, deleted: -1}
		c.parts[p] = ps
	}
	return ps
}

// Apply applies one record. An illegal one changes nothing and returns
// the error (the readers of __remote_log_metadata log it and go on, as
// Kafka's ConsumerTask does).
func (c *Cache) Apply(rec Record) error {
	switch {
	case rec.Segment != nil:
		return c.AddCopyStarted(*rec.Segment)
	case rec.Update != nil:
		return c.UpdateState(*rec.Update)
	case rec.Delete != nil:
		c.DeletePartition(*rec.Delete)
		return nil
	}
	return ErrBadRecord
}

// AddCopyStarted adds a new segment, which must be in state
// COPY_SEGMENT_STARTED (Kafka's addCopyInProgressSegment). A second
// RemoteLogSegmentMetadataRecord of the same id is the same record
// written again (a retried write) when it matches, refused otherwise.
func (c *Cache) AddCopyStarted(s Segment) error {
	if s.State != CopyStarted {
		return fmt.Errorf("%w: new segment in state %s", ErrIllegalTransition, s.State)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.part(s.Partition, true)
	if old, ok := ps.segs[s.ID]; ok {
		if old.StartOffset == s.StartOffset && old.EndOffset == s.EndOffset {
			return nil
		}
		return fmt.Errorf("%w: segment id reused", ErrIllegalTransition)
	}
	s.LeaderEpochs = slices.Clone(s.LeaderEpochs)
	ps.segs[s.ID] = &s
	return nil
}

// UpdateState moves a segment to u.State (Kafka's
// updateRemoteLogSegmentMetadata). DELETE_SEGMENT_FINISHED forgets it.
func (c *Cache) UpdateState(u Update) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.part(u.Partition, false)
	var s *Segment
	if ps != nil {
		s = ps.segs[u.ID]
	}
	if s == nil {
		return ErrUnknownSegment
	}
	if !ValidTransition(s.State, u.State) {
		return fmt.Errorf("%w: %s → %s", ErrIllegalTransition, s.State, u.State)
	}
	ns := *s
	ns.State, ns.BrokerID, ns.EventTimestamp = u.State, u.BrokerID, u.EventTimestamp
	switch u.State {
	case CopyFinished:
		for i, e := range ns.LeaderEpochs {
			end := ns.EndOffset
			if i+1 < len(ns.LeaderEpochs) {
				end = ns.LeaderEpochs[i+1].StartOffset - 1
			}
			if h, ok := ps.highest[e.Epoch]; !ok || end > h {
				ps.highest[e.Epoch] = end
			}
		}
	case DeleteFinished:
		delete(ps.segs, u.ID)
		return nil
	}
	ps.segs[u.ID] = &ns
	return nil
}

// DeletePartition records a partition's remote deletion; once FINISHED the
// partition's segments are forgotten.
func (c *Cache) DeletePartition(d PartitionDelete) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.State == PartitionDeleteFinished {
		delete(c.parts, d.Partition)
		return
	}
	c.part(d.Partition, true).deleted = d.State
}

// Segments implements Metadata: p's COPY_SEGMENT_FINISHED segments in
// StartOffset order.
func (c *Cache) Segments(p Partition) []Segment {
	return c.list(p, func(s *Segment) bool { return s.State == CopyFinished })
}

// All returns every segment of p the cache holds, whatever its state, in
// StartOffset order.
func (c *Cache) All(p Partition) []Segment {
	return c.list(p, func(*Segment) bool { return true })
}

func (c *Cache) list(p Partition, keep func(*Segment) bool) []Segment {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps := c.parts[p]
	if ps == nil {
		return nil
	}
	out := make([]Segment, 0, len(ps.segs))
	for _, s := range ps.segs {
		if keep(s) {
			cp := *s
			cp.LeaderEpochs = slices.Clone(s.LeaderEpochs)
			out = append(out, cp)
		}
	}
	slices.SortFunc(out, compareSegments)
	return out
}

// compareSegments orders segments by StartOffset, then EndOffset, then ID:
// a total order, so that lists built from a map come out the same on
// every run (the simulator replays a seed only if they do).
func compareSegments(a, b Segment) int {
	return cmp.Or(cmp.Compare(a.StartOffset, b.StartOffset), cmp.Compare(a.EndOffset, b.EndOffset),
		bytes.Compare(a.ID[:], b.ID[:]))
}

// HighestOffsetForEpoch returns the highest offset of leader epoch e that
// a finished remote segment of p held (Kafka's
// RemoteLogMetadataManager.highestOffsetForEpoch), false if none did.
func (c *Cache) HighestOffsetForEpoch(p Partition, e int32) (int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps := c.parts[p]
	if ps == nil {
		return 0, false
	}
	h, ok := ps.highest[e]
	return h, ok
}
