// Package remote is tiered storage's remote log (KIP-405): the metadata of
// the segments a partition's leader copied to the object store
// (internal/objstore), the layout of their objects, and the view readers use
// to find the segment holding an offset.
package remote

import (
	"encoding/base64"
	"fmt"
	"slices"
	"sync"

	"github.com/sluice-io/sluice/internal/epoch"
)

// SegmentState is a remote segment's state, with Kafka's
// RemoteLogSegmentState ids (as written in __remote_log_metadata).
type SegmentState int8

// The states of a remote segment, in the only order they may follow.
const (
	CopyStarted    SegmentState = 0 // COPY_SEGMENT_STARTED: objects being written
	CopyFinished   SegmentState = 1 // COPY_SEGMENT_FINISHED: readable
	DeleteStarted  SegmentState = 2 // DELETE_SEGMENT_STARTED: being removed, no longer read
	DeleteFinished SegmentState = 3 // DELETE_SEGMENT_FINISHED: gone
)

// String returns Kafka's name of the state.
func (s SegmentState) String() string {
	switch s {
	case CopyStarted:
		return "COPY_SEGMENT_STARTED"
	case CopyFinished:
		return "COPY_SEGMENT_FINISHED"
	case DeleteStarted:
		return "DELETE_SEGMENT_STARTED"
	case DeleteFinished:
		return "DELETE_SEGMENT_FINISHED"
	}
	return fmt.Sprintf("SegmentState(%d)", int8(s))
}

// Partition names a partition by topic id (and name, for object keys that
// people can read).
type Partition struct {
	TopicID   [16]byte
	Topic     string
	Partition int32
}

// Segment is one remote log segment's metadata (Kafka's
// RemoteLogSegmentMetadata).
type Segment struct {
	Partition
	// ID is the segment's RemoteLogSegmentId uuid, fresh for every upload
	// attempt, so a retried upload never overwrites an object a reader uses.
	ID [16]byte
	// StartOffset and EndOffset are the first and last offsets of the
	// segment, both inclusive (as Kafka's).
	StartOffset, EndOffset int64
	// MaxTimestamp is the largest batch MaxTimestamp in the segment (ms).
	MaxTimestamp int64
	// BrokerID is the leader that uploaded it; EventTimestamp (ms) the time
	// of the state change.
	BrokerID       int32
	EventTimestamp int64
	// LeaderEpochs are the leader epochs with their start offsets that
	// cover the segment (the epoch of StartOffset first).
	LeaderEpochs []epoch.Entry
	// SizeBytes is the size of the segment's log object.
	SizeBytes int64
	// TxnIndexEmpty is true when the segment has no aborted transaction
	// (no txnindex object is written).
	TxnIndexEmpty bool
	State         SegmentState
}

// Covers reports whether offset is in [StartOffset, EndOffset].
func (s *Segment) Covers(offset int64) bool {
	return offset >= s.StartOffset && offset <= s.EndOffset
}

// FileKind is one of the objects uploaded for a segment.
type FileKind int

// The objects of a remote segment. Each is the local file's bytes as they
// were when uploaded: the .log, .index and .timeindex files of the segment,
// its .txnindex (only when not TxnIndexEmpty), the producer snapshot as of
// the segment's end, and the leader-epoch checkpoint as of the segment's end
// (the local formats, storage.md).
const (
	FileLog FileKind = iota
	FileOffsetIndex
	FileTimeIndex
	FileTxnIndex
	FileProducerSnapshot
	FileLeaderEpochs
)

var fileSuffix = [...]string{".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".leader-epoch-checkpoint"}

// Suffix returns the kind's object key suffix.
func (k FileKind) Suffix() string { return fileSuffix[k] }

// PartitionPrefix is the key prefix under which every object of p lives:
// "{prefix}{topic}-{topic id}/{partition}/" (prefix is
// sluice.remote.storage.prefix, which ends in "/" unless empty).
func PartitionPrefix(prefix string, p Partition) string {
	return fmt.Sprintf("%s%s-%s/%d/", prefix, p.Topic, base64.RawURLEncoding.EncodeToString(p.TopicID[:]), p.Partition)
}

// ObjectKey is the key of one object of segment s:
// "{partition prefix}{start offset, 20 digits}-{segment id}{suffix}", so a
// partition's objects list in offset order.
func ObjectKey(prefix string, s *Segment, k FileKind) string {
	return fmt.Sprintf("%s%020d-%s%s", PartitionPrefix(prefix, s.Partition), s.StartOffset, base64.RawURLEncoding.EncodeToString(s.ID[:]), k.Suffix())
}

// Metadata is what a reader needs of the remote log metadata: the
// partition's readable (CopyFinished) segments.
type Metadata interface {
	// Segments returns p's CopyFinished segments in StartOffset order.
	// Segments of different leader epochs may overlap (an upload by a new
	// leader of a range an old leader also uploaded); a reader resolves
	// that with the leader epoch lineage.
	Segments(p Partition) []Segment
}

// MemMetadata is a Metadata held in memory, for tests.
// The zero value is empty and ready; it is safe for concurrent use.
type MemMetadata struct {
	mu   sync.Mutex
	segs map[Partition][]Segment
}

// Add records s as p's segment (replacing one with the same id).
func (m *MemMetadata) Add(s Segment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.segs == nil {
		m.segs = make(map[Partition][]Segment)
	}
	l := slices.DeleteFunc(m.segs[s.Partition], func(o Segment) bool { return o.ID == s.ID })
	l = append(l, s)
	slices.SortFunc(l, compareSegments)
	m.segs[s.Partition] = l
}

// Segments implements Metadata.
func (m *MemMetadata) Segments(p Partition) []Segment {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Segment
	for _, s := range m.segs[p] {
		if s.State == CopyFinished {
			out = append(out, s)
		}
	}
	return out
}
