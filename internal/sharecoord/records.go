package sharecoord

// The records of __share_group_state use Kafka's formats (KIP-932,
// share-coordinator/src/main/resources/common/message), so Kafka tools
// reading the topic understand them. Each key starts with its record type
// (Kafka's coordinator-key apiKey) and each value with its version:
//
//	ShareSnapshotKey  (type 0: GroupId, TopicId, Partition)
//	  -> ShareSnapshotValue v0 (flexible): SnapshotEpoch, StateEpoch,
//	     LeaderEpoch, StartOffset, CreateTimestamp, WriteTimestamp,
//	     StateBatches, tagged DeliveryCompleteCount (tag 0, KIP-1226)
//	ShareUpdateKey    (type 1: GroupId, TopicId, Partition)
//	  -> ShareUpdateValue v0 (flexible): SnapshotEpoch, LeaderEpoch,
//	     StartOffset, StateBatches, tagged DeliveryCompleteCount (tag 0)
//
// A snapshot is the whole state of a share partition; an update carries
// the batches one WriteShareGroupState changed, merged onto the snapshot
// (and the updates before it) on replay. A null value is a tombstone: the
// state was deleted (DeleteShareGroupState writes one for each key).

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/share"
)

// Topic is the internal topic holding share partition state.
const Topic = "__share_group_state"

// Record types, the first int16 of a key (Kafka's apiKey of
// ShareSnapshotKey and ShareUpdateKey).
const (
	// TypeSnapshot keys a ShareSnapshotValue.
	TypeSnapshot int16 = 0
	// TypeUpdate keys a ShareUpdateValue.
	TypeUpdate int16 = 1
)

// CoordinatorKey is the coordinator key of a share partition,
// "group:topicId:partition" with the topic id as Kafka prints a Uuid
// (SharePartitionKey.asCoordinatorKey): FindCoordinator's key type 2.
func CoordinatorKey(k share.Key) string {
	return fmt.Sprintf("%s:%s:%d", k.Group, base64.RawURLEncoding.EncodeToString(k.TopicID[:]), k.Partition)
}

// PartitionFor returns the __share_group_state partition of a coordinator
// key: abs(javaHashCode(key)) % n (ShareCoordinatorService.partitionFor).
func PartitionFor(coordinatorKey string, n int32) int32 { return group.PartitionFor(coordinatorKey, n) }

// Record is one decoded record of __share_group_state.
type Record struct {
	// Type is TypeSnapshot or TypeUpdate.
	Type int16
	// Key is the share partition.
	Key share.Key
	// Tombstone is set for a null value: the state was deleted.
	Tombstone bool
	// SnapshotEpoch counts the snapshots of the key; an update carries
	// the epoch of the snapshot it follows.
	SnapshotEpoch int32
	// StateEpoch is the state epoch (snapshots only).
	StateEpoch int32
	// LeaderEpoch is the writer's partition leader epoch.
	LeaderEpoch int32
	// StartOffset is the share-partition start offset (-1 in an update:
	// unchanged).
	StartOffset int64
	// DeliveryCompleteCount is as in share.State, -1 if unknown.
	DeliveryCompleteCount int32
	// CreateTimestamp and WriteTimestamp are milliseconds (snapshots
	// only): when the state was first created and when this snapshot was
	// written.
	CreateTimestamp, WriteTimestamp int64
	// Batches are the snapshot's state batches, or the update's.
	Batches []share.StateBatch
	// Offset is the record's offset in __share_group_state (set by the
	// loader and by the writer once appended; not part of the encoding).
	Offset int64
}

// ErrBadRecord reports a record of __share_group_state that does not parse.
var ErrBadRecord = errors.New("sharecoord: malformed __share_group_state record")

// maxBatches bounds the state batches of one decoded value.
const maxBatches = 1 << 20

// EncodeKey encodes r's key.
func (r *Record) EncodeKey() []byte {
	b := make([]byte, 0, 2+2+len(r.Key.Group)+16+4)
	b = binary.BigEndian.AppendUint16(b, uint16(r.Type))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Key.Group)))
	b = append(b, r.Key.Group...)
	b = append(b, r.Key.TopicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(r.Key.Partition))
}

// EncodeValue encodes r's value, nil for a tombstone.
func (r *Record) EncodeValue() []byte {
	if r.Tombstone {
		return nil
	}
	b := make([]byte, 0, 64+len(r.Batches)*20)
	b = binary.BigEndian.AppendUint16(b, 0) // value version 0
	b = binary.BigEndian.AppendUint32(b, uint32(r.SnapshotEpoch))
	if r.Type == TypeSnapshot {
		b = binary.BigEndian.AppendUint32(b, uint32(r.StateEpoch))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(r.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(r.StartOffset))
	if r.Type == TypeSnapshot {
		b = binary.BigEndian.AppendUint64(b, uint64(r.CreateTimestamp))
		b = binary.BigEndian.AppendUint64(b, uint64(r.WriteTimestamp))
	}
	b = binary.AppendUvarint(b, uint64(len(r.Batches))+1) // compact array
	for _, sb := range r.Batches {
		b = binary.BigEndian.AppendUint64(b, uint64(sb.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(sb.LastOffset))
		b = append(b, byte(sb.DeliveryState))
		b = binary.BigEndian.AppendUint16(b, uint16(sb.DeliveryCount))
		b = append(b, 0) // no tagged fields
	}
	if r.DeliveryCompleteCount == -1 { // the tagged field's default
		return append(b, 0)
	}
	b = append(b, 1, 0, 4) // one tagged field: tag 0, 4 bytes
	return binary.BigEndian.AppendUint32(b, uint32(r.DeliveryCompleteCount))
}

// reader reads big-endian fields, remembering the first short read.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return make([]byte, max(n, 0))
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *reader) i8() int8   { return int8(r.take(1)[0]) }
func (r *reader) i16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *reader) i32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }
func (r *reader) i64() int64 { return int64(binary.BigEndian.Uint64(r.take(8))) }
func (r *reader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// DecodeRecord decodes one record. Keys of other types, and values of
// other versions, are ErrBadRecord (the loader skips them).
func DecodeRecord(key, value []byte) (Record, error) {
	var rec Record
	kr := &reader{b: key}
	rec.Type = kr.i16()
	if rec.Type != TypeSnapshot && rec.Type != TypeUpdate {
		return rec, ErrBadRecord
	}
	n := kr.i16()
	rec.Key.Group = string(kr.take(int(n)))
	copy(rec.Key.TopicID[:], kr.take(16))
	rec.Key.Partition = kr.i32()
	if kr.bad || len(kr.b) != 0 {
		return rec, ErrBadRecord
	}
	if value == nil {
		rec.Tombstone = true
		return rec, nil
	}
	vr := &reader{b: value}
	if vr.i16() != 0 {
		return rec, ErrBadRecord
	}
	rec.SnapshotEpoch = vr.i32()
	rec.StartOffset = -1
	if rec.Type == TypeSnapshot {
		rec.StateEpoch = vr.i32()
	}
	rec.LeaderEpoch = vr.i32()
	rec.StartOffset = vr.i64()
	if rec.Type == TypeSnapshot {
		rec.CreateTimestamp = vr.i64()
		rec.WriteTimestamp = vr.i64()
	}
	nb := vr.uvarint()
	if nb == 0 || nb-1 > maxBatches || (nb-1)*20 > uint64(len(vr.b)) {
		return rec, ErrBadRecord
	}
	if nb > 1 {
		rec.Batches = make([]share.StateBatch, 0, nb-1)
	}
	for range nb - 1 {
		sb := share.StateBatch{FirstOffset: vr.i64(), LastOffset: vr.i64(), DeliveryState: vr.i8(), DeliveryCount: vr.i16()}
		skipTags(vr, nil)
		rec.Batches = append(rec.Batches, sb)
	}
	rec.DeliveryCompleteCount = -1
	skipTags(vr, func(tag uint64, data []byte) {
		if tag == 0 && len(data) == 4 {
			rec.DeliveryCompleteCount = int32(binary.BigEndian.Uint32(data))
		}
	})
	if vr.bad || len(vr.b) != 0 {
		return rec, ErrBadRecord
	}
	return rec, nil
}

// skipTags reads a tagged-field section, handing each field to fn.
func skipTags(r *reader, fn func(tag uint64, data []byte)) {
	n := r.uvarint()
	if n > math.MaxInt16 {
		r.bad = true
		return
	}
	for range n {
		tag := r.uvarint()
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.bad = true
			return
		}
		data := r.take(int(size))
		if fn != nil && !r.bad {
			fn(tag, data)
		}
	}
}

// ValidCoordinatorKey reports whether key has the form of CoordinatorKey:
// a non-empty group, a topic id and a non-negative partition, separated
// by colons (the group may itself hold colons).
func ValidCoordinatorKey(key string) bool {
	last := strings.LastIndexByte(key, ':')
	if last <= 0 {
		return false
	}
	mid := strings.LastIndexByte(key[:last], ':')
	if mid <= 0 {
		return false
	}
	id, err := base64.RawURLEncoding.DecodeString(key[mid+1 : last])
	if err != nil || len(id) != 16 {
		return false
	}
	p, err := strconv.ParseInt(key[last+1:], 10, 32)
	return err == nil && p >= 0
}
