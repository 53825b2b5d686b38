package remote

// The records of __remote_log_metadata, in Kafka's formats, so the topic
// reads the same as a Kafka cluster's (TopicBasedRemoteLogMetadataManager,
// RemoteLogMetadataSerde): each record value is Kafka's metadata record
// frame (AbstractApiMessageSerde: unsigned varints frame version 1, api key,
// record version) followed by the message in the flexible encoding
// (compact strings and arrays, uuids, tagged fields). The api keys are
// RemoteLogSegmentMetadataRecord (0), RemoteLogSegmentMetadataUpdateRecord
// (1) and RemotePartitionDeleteMetadataRecord (2), from
// storage/src/main/resources/message/*.json. sluice writes version 0 and
// reads versions 0 and 1 (version 1 adds tagged fields, which it skips).
// Records have no key.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/sluice-io/sluice/internal/epoch"
)

// RecordKind is a __remote_log_metadata record's api key.
type RecordKind int16

// The record kinds, with Kafka's api keys.
const (
	KindSegment         RecordKind = 0 // RemoteLogSegmentMetadataRecord: COPY_SEGMENT_STARTED
	KindSegmentUpdate   RecordKind = 1 // RemoteLogSegmentMetadataUpdateRecord: a later state
	KindPartitionDelete RecordKind = 2 // RemotePartitionDeleteMetadataRecord
)

// frameVersion is AbstractApiMessageSerde's DEFAULT_FRAME_VERSION.
const frameVersion = 1

// maxRecordVersion is the newest record version Decode reads.
const maxRecordVersion = 1

// PartitionDeleteState is Kafka's RemotePartitionDeleteState.
type PartitionDeleteState int8

// The states of a partition's remote deletion (a deleted topic).
const (
	PartitionDeleteMarked   PartitionDeleteState = 0 // DELETE_PARTITION_MARKED
	PartitionDeleteStarted  PartitionDeleteState = 1 // DELETE_PARTITION_STARTED
	PartitionDeleteFinished PartitionDeleteState = 2 // DELETE_PARTITION_FINISHED
)

// Update is a remote segment's change of state (Kafka's
// RemoteLogSegmentMetadataUpdate).
type Update struct {
	Partition
	ID             [16]byte
	BrokerID       int32
	EventTimestamp int64
	State          SegmentState
}

// PartitionDelete is Kafka's RemotePartitionDeleteMetadata.
type PartitionDelete struct {
	Partition
	BrokerID       int32
	EventTimestamp int64
	State          PartitionDeleteState
}

// Record is one decoded __remote_log_metadata record: exactly one of
// Segment, Update and Delete is set, as Kind says.
type Record struct {
	Kind    RecordKind
	Segment *Segment
	Update  *Update
	Delete  *PartitionDelete
}

// ErrBadRecord is returned by Decode for bytes that are not a record it
// reads.
var ErrBadRecord = errors.New("remote: malformed __remote_log_metadata record")

// EncodeSegment returns s as a RemoteLogSegmentMetadataRecord (version 0).
// Its state is written as is; Kafka writes this record for
// COPY_SEGMENT_STARTED only.
func EncodeSegment(s *Segment) []byte {
	w := header(KindSegment)
	w = putSegmentID(w, s.Partition, s.ID)
	w = binary.BigEndian.AppendUint64(w, uint64(s.StartOffset))
	w = binary.BigEndian.AppendUint64(w, uint64(s.EndOffset))
	w = binary.BigEndian.AppendUint32(w, uint32(s.BrokerID))
	w = binary.BigEndian.AppendUint64(w, uint64(s.MaxTimestamp))
	w = binary.BigEndian.AppendUint64(w, uint64(s.EventTimestamp))
	w = binary.AppendUvarint(w, uint64(len(s.LeaderEpochs))+1)
	for _, e := range s.LeaderEpochs {
		w = binary.BigEndian.AppendUint32(w, uint32(e.Epoch))
		w = binary.BigEndian.AppendUint64(w, uint64(e.StartOffset))
		w = append(w, 0) // no tagged fields
	}
	w = binary.BigEndian.AppendUint32(w, uint32(min(max(s.SizeBytes, 0), math.MaxInt32)))
	w = append(w, 0) // CustomMetadata: null
	w = append(w, byte(s.State))
	// Tagged fields: TxnIndexEmpty (tag 0), written when true (its
	// default is false).
	if s.TxnIndexEmpty {
		w = append(w, 1, 0, 1, 1)
	} else {
		w = append(w, 0)
	}
	return w
}

// EncodeUpdate returns u as a RemoteLogSegmentMetadataUpdateRecord
// (version 0).
func EncodeUpdate(u *Update) []byte {
	w := header(KindSegmentUpdate)
	w = putSegmentID(w, u.Partition, u.ID)
	w = binary.BigEndian.AppendUint32(w, uint32(u.BrokerID))
	w = binary.BigEndian.AppendUint64(w, uint64(u.EventTimestamp))
	w = append(w, 0) // CustomMetadata: null
	w = append(w, byte(u.State))
	return append(w, 0)
}

// EncodePartitionDelete returns d as a RemotePartitionDeleteMetadataRecord
// (version 0).
func EncodePartitionDelete(d *PartitionDelete) []byte {
	w := header(KindPartitionDelete)
	w = putTopicIDPartition(w, d.Partition)
	w = binary.BigEndian.AppendUint32(w, uint32(d.BrokerID))
	w = binary.BigEndian.AppendUint64(w, uint64(d.EventTimestamp))
	w = append(w, byte(d.State))
	return append(w, 0)
}

func header(k RecordKind) []byte {
	w := make([]byte, 0, 128)
	w = binary.AppendUvarint(w, frameVersion)
	w = binary.AppendUvarint(w, uint64(k))
	return binary.AppendUvarint(w, 0)
}

func putTopicIDPartition(w []byte, p Partition) []byte {
	w = binary.AppendUvarint(w, uint64(len(p.Topic))+1)
	w = append(w, p.Topic...)
	w = append(w, p.TopicID[:]...)
	w = binary.BigEndian.AppendUint32(w, uint32(p.Partition))
	return append(w, 0)
}

func putSegmentID(w []byte, p Partition, id [16]byte) []byte {
	w = putTopicIDPartition(w, p)
	w = append(w, id[:]...)
	return append(w, 0)
}

// Decode parses one record value written by a Kafka broker or by
// EncodeSegment, EncodeUpdate or EncodePartitionDelete.
func Decode(b []byte) (Record, error) {
	r := &reader{b: b}
	if fv := r.uvarint(); fv != frameVersion {
		return Record{}, fmt.Errorf("%w: frame version %d", ErrBadRecord, fv)
	}
	kind := RecordKind(r.uvarint())
	version := r.uvarint()
	if r.err == nil && version > maxRecordVersion {
		return Record{}, fmt.Errorf("%w: version %d", ErrBadRecord, version)
	}
	var rec Record
	rec.Kind = kind
	switch kind {
	case KindSegment:
		s := &Segment{}
		s.Partition, s.ID = r.segmentID()
		s.StartOffset = r.int64()
		s.EndOffset = r.int64()
		s.BrokerID = r.int32()
		s.MaxTimestamp = r.int64()
		s.EventTimestamp = r.int64()
		n := r.arrayLen(12)
		for range n {
			e := r.int32()
			o := r.int64()
			r.tags(nil)
			s.LeaderEpochs = append(s.LeaderEpochs, epoch.Entry{Epoch: e, StartOffset: o})
		}
		s.SizeBytes = int64(r.int32())
		r.nullableBytes()
		s.State = SegmentState(r.int8())
		r.tags(func(tag uint64, v []byte) {
			if tag == 0 && len(v) == 1 {
				s.TxnIndexEmpty = v[0] != 0
			}
		})
		rec.Segment = s
	case KindSegmentUpdate:
		u := &Update{}
		u.Partition, u.ID = r.segmentID()
		u.BrokerID = r.int32()
		u.EventTimestamp = r.int64()
		r.nullableBytes()
		u.State = SegmentState(r.int8())
		r.tags(nil)
		rec.Update = u
	case KindPartitionDelete:
		d := &PartitionDelete{}
		d.Partition = r.topicIDPartition()
		d.BrokerID = r.int32()
		d.EventTimestamp = r.int64()
		d.State = PartitionDeleteState(r.int8())
		r.tags(nil)
		rec.Delete = d
	default:
		if r.err == nil {
			return Record{}, fmt.Errorf("%w: api key %d", ErrBadRecord, kind)
		}
	}
	if r.err != nil {
		return Record{}, r.err
	}
	if len(r.b) != 0 {
		return Record{}, fmt.Errorf("%w: %d bytes of garbage after the record", ErrBadRecord, len(r.b))
	}
	return rec, nil
}

// reader decodes Kafka's flexible message encoding; its first error
// sticks and every later read returns zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: short or bad %s", ErrBadRecord, what)
	}
	r.b = nil
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.fail(what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int8() int8 {
	if v := r.take(1, "int8"); v != nil {
		return int8(v[0])
	}
	return 0
}

func (r *reader) int32() int32 {
	if v := r.take(4, "int32"); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (r *reader) int64() int64 {
	if v := r.take(8, "int64"); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

// arrayLen reads a compact array length whose elements take at least
// minSize bytes each (so a corrupt length cannot make a huge slice).
func (r *reader) arrayLen(minSize int) int {
	n := r.uvarint()
	if r.err != nil {
		return 0
	}
	if n == 0 || n-1 > uint64(len(r.b)/minSize) {
		r.fail("array length")
		return 0
	}
	return int(n - 1)
}

func (r *reader) compactString(what string) string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n == 0 || n-1 > uint64(len(r.b)) {
		r.fail(what)
		return ""
	}
	return string(r.take(int(n-1), what))
}

func (r *reader) nullableBytes() []byte {
	n := r.uvarint()
	if r.err != nil || n == 0 {
		return nil
	}
	if n-1 > uint64(len(r.b)) {
		r.fail("bytes")
		return nil
	}
	return r.take(int(n-1), "bytes")
}

func (r *reader) uuid() (id [16]byte) {
	copy(id[:], r.take(16, "uuid"))
	return id
}

// tags reads a tagged-fields section, handing each field to fn (nil:
// skip them all).
func (r *reader) tags(fn func(tag uint64, v []byte)) {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail("tagged fields")
		return
	}
	for range n {
		tag := r.uvarint()
		size := r.uvarint()
		if r.err == nil && size > uint64(len(r.b)) {
			r.fail("tagged field")
			return
		}
		v := r.take(int(size), "tagged field")
		if r.err != nil {
			return
		}
		if fn != nil {
			fn(tag, v)
		}
	}
}

func (r *reader) topicIDPartition() Partition {
	var p Partition
	p.Topic = r.compactString("topic name")
	p.TopicID = r.uuid()
	p.Partition = r.int32()
	r.tags(nil)
	return p
}

func (r *reader) segmentID() (Partition, [16]byte) {
	p := r.topicIDPartition()
	id := r.uuid()
	r.tags(nil)
	return p, id
}
