package share

// The records a share group (KIP-932) writes to __consumer_offsets, in
// Kafka's formats (group-coordinator/src/main/resources/common/message/
// ShareGroup*.json), so a tool reading the topic sees what a Kafka broker
// writes. A key is an int16 type (Kafka calls it the key version)
// followed by the non-flexible key fields; a value is an int16 version (0)
// followed by the flexible fields and a tagged-field section. A nil value
// is a tombstone. Key type 9 (ShareGroupPartitionMetadata) is no longer
// written by Kafka 4.1 (KIP-1101 replaced it by the metadata hash) and is
// skipped when read.

import (
	"errors"
	"fmt"
)

// Key types (Kafka's CoordinatorRecordType / key versions) of share-group
// records.
const (
	TypeLegacyPartitionMetadata  int16 = 9  // ShareGroupPartitionMetadataKey (Kafka 4.0 only)
	TypeMemberMetadata           int16 = 10 // ShareGroupMemberMetadataKey
	TypeGroupMetadata            int16 = 11 // ShareGroupMetadataKey
	TypeTargetAssignmentMetadata int16 = 12 // ShareGroupTargetAssignmentMetadataKey
	TypeTargetAssignmentMember   int16 = 13 // ShareGroupTargetAssignmentMemberKey
	TypeCurrentMemberAssignment  int16 = 14 // ShareGroupCurrentMemberAssignmentKey
	TypeStatePartitionMetadata   int16 = 15 // ShareGroupStatePartitionMetadataKey
)

// IsShareGroupType reports whether key type t is a share-group record's.
func IsShareGroupType(t int16) bool {
	return t >= TypeLegacyPartitionMetadata && t <= TypeStatePartitionMetadata
}

// ErrNotShareGroupRecord is returned by DecodeKey for a key of another
// record type (offset commits, classic or consumer groups).
var ErrNotShareGroupRecord = errors.New("share: not a share-group record")

// errLegacy is returned by DecodeKey for a type-9 key, which is skipped.
var errLegacy = errors.New("share: legacy partition metadata record")

// Key is a share-group record key. Member is set for the member,
// target-assignment-member and current-assignment types.
type Key struct {
	Type   int16
	Group  string
	Member string
}

// hasMember reports whether keys of type t carry a member id.
func hasMember(t int16) bool {
	return t == TypeMemberMetadata || t == TypeTargetAssignmentMember || t == TypeCurrentMemberAssignment
}

// Encode returns the key's bytes.
func (k Key) Encode() []byte {
	w := &writer{}
	w.I16(k.Type)
	w.Str(k.Group)
	if hasMember(k.Type) {
		w.Str(k.Member)
	}
	return w.B
}

// DecodeKey parses a record key; a key of a type this package does not
// own returns ErrNotShareGroupRecord.
func DecodeKey(b []byte) (Key, error) {
	r := &reader{B: b}
	k := Key{Type: r.I16()}
	if r.Err != nil {
		return Key{}, r.Err
	}
	switch k.Type {
	case TypeLegacyPartitionMetadata:
		return Key{}, errLegacy
	case TypeGroupMetadata, TypeTargetAssignmentMetadata, TypeStatePartitionMetadata:
		k.Group = r.Str()
	case TypeMemberMetadata, TypeTargetAssignmentMember, TypeCurrentMemberAssignment:
		k.Group = r.Str()
		k.Member = r.Str()
	default:
		return Key{}, ErrNotShareGroupRecord
	}
	if err := r.Done(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Value is the value of a share-group record: one of the *Value types of
// this package.
type Value interface {
	// recordType is the key type the value belongs to.
	recordType() int16
	// encode appends the value's fields after the version.
	encode(w *writer)
	// decode reads the value's fields after the version.
	decode(r *reader)
}

// Record is one key and its value; a nil Value is a tombstone.
type Record struct {
	Key   Key
	Value Value
}

var typeNames = map[int16]string{
	TypeMemberMetadata:           "ShareGroupMemberMetadata",
	TypeGroupMetadata:            "ShareGroupMetadata",
	TypeTargetAssignmentMetadata: "ShareGroupTargetAssignmentMetadata",
	TypeTargetAssignmentMember:   "ShareGroupTargetAssignmentMember",
	TypeCurrentMemberAssignment:  "ShareGroupCurrentMemberAssignment",
	TypeStatePartitionMetadata:   "ShareGroupStatePartitionMetadata",
}

// String is a short description of the record, for test output.
func (r Record) String() string {
	id := r.Key.Group
	if r.Key.Member != "" {
		id += "/" + r.Key.Member
	}
	if r.Value == nil {
		return fmt.Sprintf("%s(%s) tombstone", typeNames[r.Key.Type], id)
	}
	return fmt.Sprintf("%s(%s) %+v", typeNames[r.Key.Type], id, r.Value)
}

// Encode returns the record's key and value bytes; the value is nil for a
// tombstone.
func (r Record) Encode() (key, value []byte) {
	key = r.Key.Encode()
	if r.Value == nil {
		return key, nil
	}
	return key, EncodeValue(r.Value)
}

// EncodeValue returns v's bytes: version 0, then its fields.
func EncodeValue(v Value) []byte {
	w := &writer{}
	w.I16(0)
	v.encode(w)
	return w.B
}

// DecodeRecord parses a key and value written by Encode (or by Kafka). A
// nil value is a tombstone.
func DecodeRecord(key, value []byte) (Record, error) {
	k, err := DecodeKey(key)
	if err != nil {
		return Record{}, err
	}
	if value == nil {
		return Record{Key: k}, nil
	}
	v, err := DecodeValue(k.Type, value)
	if err != nil {
		return Record{}, err
	}
	return Record{Key: k, Value: v}, nil
}

// DecodeValue parses the value of a record of key type t.
func DecodeValue(t int16, b []byte) (Value, error) {
	var v Value
	switch t {
	case TypeMemberMetadata:
		v = &MemberMetadataValue{}
	case TypeGroupMetadata:
		v = &GroupMetadataValue{}
	case TypeTargetAssignmentMetadata:
		v = &TargetAssignmentMetadataValue{}
	case TypeTargetAssignmentMember:
		v = &TargetAssignmentMemberValue{}
	case TypeCurrentMemberAssignment:
		v = &CurrentMemberAssignmentValue{}
	case TypeStatePartitionMetadata:
		v = &StatePartitionMetadataValue{}
	default:
		return nil, ErrNotShareGroupRecord
	}
	r := &reader{B: b}
	if ver := r.I16(); r.Err == nil && ver != 0 {
		return nil, fmt.Errorf("share: %s value version %d unsupported", typeNames[t], ver)
	}
	v.decode(r)
	if err := r.Done(); err != nil {
		return nil, err
	}
	return v, nil
}

// ReplayEncoded decodes and replays one record as read from the log;
// records of other types, and Kafka 4.0's type 9, are ignored.
func (mgr *Manager) ReplayEncoded(key, value []byte) error {
	rec, err := DecodeRecord(key, value)
	if err == ErrNotShareGroupRecord || err == errLegacy {
		return nil
	}
	if err != nil {
		return err
	}
	return mgr.Replay(rec)
}
