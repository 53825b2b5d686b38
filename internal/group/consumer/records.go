package consumer

// The records a consumer group (KIP-848) writes to __consumer_offsets, in
// Kafka's formats (group-coordinator/src/main/resources/common/message/
// ConsumerGroup*.json), so a tool reading the topic sees what a Kafka
// broker writes. A key is an int16 type (Kafka calls it the key version)
// followed by the non-flexible key fields; a value is an int16 version (0)
// followed by the flexible fields and a tagged-field section. A nil value
// is a tombstone.

import (
	"errors"
	"fmt"
)

// Key types (Kafka's CoordinatorRecordType / key versions) of consumer-group
// records.
const (
	TypeGroupMetadata            int16 = 3  // ConsumerGroupMetadataKey
	TypePartitionMetadata        int16 = 4  // ConsumerGroupPartitionMetadataKey
	TypeMemberMetadata           int16 = 5  // ConsumerGroupMemberMetadataKey
	TypeTargetAssignmentMetadata int16 = 6  // ConsumerGroupTargetAssignmentMetadataKey
	TypeTargetAssignmentMember   int16 = 7  // ConsumerGroupTargetAssignmentMemberKey
	TypeCurrentMemberAssignment  int16 = 8  // ConsumerGroupCurrentMemberAssignmentKey
	TypeRegularExpression        int16 = 16 // ConsumerGroupRegularExpressionKey (Kafka 4.0)
)

// ErrNotConsumerGroupRecord is returned by DecodeKey for a key of another
// record type (offset commits, classic groups, share groups).
var ErrNotConsumerGroupRecord = errors.New("consumer: not a consumer-group record")

// Key is a consumer-group record key. Member is set for the member,
// target-assignment-member and current-assignment types; Regex for the
// regular-expression type.
type Key struct {
	Type   int16
	Group  string
	Member string
	Regex  string
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
	switch {
	case hasMember(k.Type):
		w.Str(k.Member)
	case k.Type == TypeRegularExpression:
		w.Str(k.Regex)
	}
	return w.B
}

// DecodeKey parses a record key; a key of a type this package does not
// own returns ErrNotConsumerGroupRecord.
func DecodeKey(b []byte) (Key, error) {
	r := &reader{B: b}
	k := Key{Type: r.I16()}
	if r.Err != nil {
		return Key{}, r.Err
	}
	switch k.Type {
	case TypeGroupMetadata, TypePartitionMetadata, TypeTargetAssignmentMetadata:
		k.Group = r.Str()
	case TypeMemberMetadata, TypeTargetAssignmentMember, TypeCurrentMemberAssignment:
		k.Group = r.Str()
		k.Member = r.Str()
	case TypeRegularExpression:
		k.Group = r.Str()
		k.Regex = r.Str()
	default:
		return Key{}, ErrNotConsumerGroupRecord
	}
	if err := r.Done(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Value is the value of a consumer-group record: one of the *Value types
// of this package.
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

// String is a short description of the record, for test output.
func (r Record) String() string {
	id := r.Key.Group
	if r.Key.Member != "" {
		id += "/" + r.Key.Member
	}
	if r.Key.Regex != "" {
		id += "/" + r.Key.Regex
	}
	name := typeNames[r.Key.Type]
	if r.Value == nil {
		return fmt.Sprintf("%s(%s) tombstone", name, id)
	}
	return fmt.Sprintf("%s(%s) %+v", name, id, r.Value)
}

var typeNames = map[int16]string{
	TypeGroupMetadata:            "GroupMetadata",
	TypePartitionMetadata:        "PartitionMetadata",
	TypeMemberMetadata:           "MemberMetadata",
	TypeTargetAssignmentMetadata: "TargetAssignmentMetadata",
	TypeTargetAssignmentMember:   "TargetAssignmentMember",
	TypeCurrentMemberAssignment:  "CurrentMemberAssignment",
	TypeRegularExpression:        "RegularExpression",
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
	case TypeGroupMetadata:
		v = &GroupMetadataValue{}
	case TypePartitionMetadata:
		v = &PartitionMetadataValue{}
	case TypeMemberMetadata:
		v = &MemberMetadataValue{}
	case TypeTargetAssignmentMetadata:
		v = &TargetAssignmentMetadataValue{}
	case TypeTargetAssignmentMember:
		v = &TargetAssignmentMemberValue{}
	case TypeCurrentMemberAssignment:
		v = &CurrentMemberAssignmentValue{}
	case TypeRegularExpression:
		v = &RegularExpressionValue{}
	default:
		return nil, ErrNotConsumerGroupRecord
	}
	r := &reader{B: b}
	if ver := r.I16(); r.Err == nil && ver != 0 {
		return nil, fmt.Errorf("consumer: %s value version %d unsupported", typeNames[t], ver)
	}
	v.decode(r)
	if err := r.Done(); err != nil {
		return nil, err
	}
	return v, nil
}
