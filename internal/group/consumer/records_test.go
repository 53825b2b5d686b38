package consumer

import (
	"bytes"
	"reflect"
	"testing"
)

func sp(s string) *string { return &s }

func sampleRecords() []Record {
	tid := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	return []Record{
		{Key{Type: TypeGroupMetadata, Group: "g"}, &GroupMetadataValue{Epoch: 7}},
		{Key{Type: TypeGroupMetadata, Group: "g"}, &GroupMetadataValue{Epoch: 8, MetadataHash: -42}},
		{Key{Type: TypePartitionMetadata, Group: "g"}, &PartitionMetadataValue{Topics: []TopicMetadata{
			{TopicID: tid, TopicName: "t", NumPartitions: 3},
			{TopicID: [16]byte{9}, TopicName: "u", NumPartitions: 1, PartitionRacks: []PartitionRacks{{Partition: 0, Racks: []string{"a", "b"}}}},
		}}},
		{Key{Type: TypeMemberMetadata, Group: "g", Member: "m1"}, &MemberMetadataValue{
			InstanceID: sp("i1"), ClientID: "c", ClientHost: "/127.0.0.1",
			SubscribedTopicNames: []string{"t", "u"}, RebalanceTimeoutMs: 30000, ServerAssignor: sp("range"),
		}},
		{Key{Type: TypeMemberMetadata, Group: "g", Member: "m2"}, &MemberMetadataValue{
			RackID: sp("r"), SubscribedTopicRegex: sp("t.*"), RebalanceTimeoutMs: -1,
			Classic: &ClassicMemberMetadata{SessionTimeoutMs: 45000, SupportedProtocols: []ClassicProtocol{{Name: "range", Metadata: []byte{0, 1}}}},
		}},
		{Key{Type: TypeTargetAssignmentMetadata, Group: "g"}, &TargetAssignmentMetadataValue{AssignmentEpoch: 7}},
		{Key{Type: TypeTargetAssignmentMember, Group: "g", Member: "m1"}, &TargetAssignmentMemberValue{
			TopicPartitions: []TopicPartitions{{TopicID: tid, Partitions: []int32{0, 2}}},
		}},
		{Key{Type: TypeCurrentMemberAssignment, Group: "g", Member: "m1"}, &CurrentMemberAssignmentValue{
			MemberEpoch: 7, PreviousMemberEpoch: 6, State: 1,
			AssignedPartitions:          []TopicPartitions{{TopicID: tid, Partitions: []int32{0}}},
			PartitionsPendingRevocation: []TopicPartitions{{TopicID: tid, Partitions: []int32{1}}},
		}},
		{Key{Type: TypeRegularExpression, Group: "g", Regex: "t.*"}, &RegularExpressionValue{Topics: []string{"t", "tt"}, Version: 12, Timestamp: 1700000000000}},
		{Key{Type: TypeCurrentMemberAssignment, Group: "g", Member: "m1"}, nil},
		{Key{Type: TypeGroupMetadata, Group: "g"}, nil},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range sampleRecords() {
		k, v := rec.Encode()
		got, err := DecodeRecord(k, v)
		if err != nil {
			t.Fatalf("%v: decode: %v", rec, err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Fatalf("round trip:\n got %v\nwant %v", got, rec)
		}
		k2, v2 := got.Encode()
		if !bytes.Equal(k, k2) || !bytes.Equal(v, v2) {
			t.Fatalf("%v: re-encoding differs", rec)
		}
	}
}

// TestRecordBytes pins the layout against bytes worked out by hand from
// Kafka's schemas: keys are int16 type + int16-length strings; values are
// int16 version 0 + compact fields + a tagged-field count.
func TestRecordBytes(t *testing.T) {
	k, v := Record{Key{Type: TypeGroupMetadata, Group: "g"}, &GroupMetadataValue{Epoch: 5, MetadataHash: 1}}.Encode()
	wantK := []byte{0, 3, 0, 1, 'g'}
	wantV := []byte{0, 0, 0, 0, 0, 5, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1}
	if !bytes.Equal(k, wantK) || !bytes.Equal(v, wantV) {
		t.Fatalf("group metadata: key %x value %x", k, v)
	}
	k, v = Record{Key{Type: TypeCurrentMemberAssignment, Group: "g", Member: "m"}, &CurrentMemberAssignmentValue{
		MemberEpoch: 2, PreviousMemberEpoch: 1, State: 0,
		AssignedPartitions: []TopicPartitions{{TopicID: [16]byte{15: 9}, Partitions: []int32{3}}},
	}}.Encode()
	wantK = []byte{0, 8, 0, 1, 'g', 0, 1, 'm'}
	wantV = []byte{0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0,
		2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 2, 0, 0, 0, 3, 0,
		1, 0}
	if !bytes.Equal(k, wantK) || !bytes.Equal(v, wantV) {
		t.Fatalf("current assignment: key %x value %x", k, v)
	}
	// A tagged nullable struct: size, presence marker 1, the struct.
	_, v = Record{Key{Type: TypeMemberMetadata, Group: "g", Member: "m"}, &MemberMetadataValue{
		Classic: &ClassicMemberMetadata{SessionTimeoutMs: 1},
	}}.Encode()
	wantV = []byte{0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0,
		1, 0, 7, 1, 0, 0, 0, 1, 1, 0}
	if !bytes.Equal(v, wantV) {
		t.Fatalf("member metadata: value %x", v)
	}
}

func TestDecodeRejects(t *testing.T) {
	if _, err := DecodeKey([]byte{0, 1, 0, 1, 'g', 0, 0, 0, 0, 0}); err != ErrNotConsumerGroupRecord {
		t.Fatalf("offset commit key: %v", err)
	}
	k, v := sampleRecords()[0].Encode()
	if _, err := DecodeRecord(k, v[:len(v)-1]); err == nil {
		t.Fatal("truncated value decoded")
	}
	if _, err := DecodeRecord(k, append(v, 0)); err == nil {
		t.Fatal("trailing bytes decoded")
	}
	bad := append([]byte{0, 1}, v[2:]...)
	if _, err := DecodeRecord(k, bad); err == nil {
		t.Fatal("value version 1 decoded")
	}
	// A hostile array count must fail, not allocate.
	if _, err := DecodeValue(TypeTargetAssignmentMember, []byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x07}); err == nil {
		t.Fatal("huge count decoded")
	}
}

// FuzzDecodeRecord checks that decoding never panics, and that whatever
// decodes re-encodes to bytes that decode to the same record.
func FuzzDecodeRecord(f *testing.F) {
	for _, rec := range sampleRecords() {
		k, v := rec.Encode()
		f.Add(k, v)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		rec, err := DecodeRecord(key, value)
		if err != nil {
			return
		}
		k2, v2 := rec.Encode()
		again, err := DecodeRecord(k2, v2)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(rec, again) {
			t.Fatalf("re-decode differs:\n%v\n%v", rec, again)
		}
	})
}
