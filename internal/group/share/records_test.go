package share

import (
	"bytes"
	"reflect"
	"testing"
)

// sampleRecords has a record of every type, and tombstones.
func sampleRecords() []Record {
	rack := "rack-a"
	t1 := TopicID{1}
	return []Record{
		{Key{Type: TypeMemberMetadata, Group: "g", Member: "m"}, &MemberMetadataValue{RackID: &rack, ClientID: "c", ClientHost: "/1.2.3.4", SubscribedTopicNames: []string{"a", "b"}}},
		{Key{Type: TypeMemberMetadata, Group: "g", Member: "n"}, &MemberMetadataValue{ClientID: "c2", ClientHost: "/h"}},
		{Key{Type: TypeGroupMetadata, Group: "g"}, &GroupMetadataValue{Epoch: 3, MetadataHash: -42}},
		{Key{Type: TypeGroupMetadata, Group: "g"}, &GroupMetadataValue{Epoch: 4}},
		{Key{Type: TypeTargetAssignmentMetadata, Group: "g"}, &TargetAssignmentMetadataValue{AssignmentEpoch: 3}},
		{Key{Type: TypeTargetAssignmentMember, Group: "g", Member: "m"}, &TargetAssignmentMemberValue{TopicPartitions: []TopicPartitionsValue{{TopicID: t1, Partitions: []int32{0, 2}}}}},
		{Key{Type: TypeCurrentMemberAssignment, Group: "g", Member: "m"}, &CurrentMemberAssignmentValue{MemberEpoch: 3, PreviousMemberEpoch: 2, AssignedPartitions: []TopicPartitionsValue{{TopicID: t1, Partitions: []int32{1}}}}},
		{Key{Type: TypeStatePartitionMetadata, Group: "g"}, &StatePartitionMetadataValue{
			InitializingTopics: []TopicPartitionsInfo{{TopicID: t1, TopicName: "a", Partitions: []int32{3}}},
			InitializedTopics:  []TopicPartitionsInfo{{TopicID: t1, TopicName: "a", Partitions: []int32{0, 1}}},
			DeletingTopics:     []TopicInfo{{TopicID: TopicID{2}, TopicName: "gone"}}}},
		{Key: Key{Type: TypeTargetAssignmentMember, Group: "g", Member: "m"}},
		{Key: Key{Type: TypeGroupMetadata, Group: "g"}},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range sampleRecords() {
		k, v := rec.Encode()
		got, err := DecodeRecord(k, v)
		if err != nil {
			t.Fatalf("%v: %v", rec, err)
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

// TestKafkaKeyAndValueBytes checks the wire form against Kafka's
// generated encoding: key version 11 then the group id as an int16-length
// string; value version 0, the epoch, and tagged field 0 (the metadata
// hash, 8 bytes).
func TestKafkaKeyAndValueBytes(t *testing.T) {
	k, v := Record{Key{Type: TypeGroupMetadata, Group: "g"}, &GroupMetadataValue{Epoch: 1, MetadataHash: 1}}.Encode()
	if want := []byte{0, 11, 0, 1, 'g'}; !bytes.Equal(k, want) {
		t.Fatalf("key % x, want % x", k, want)
	}
	want := []byte{0, 0, 0, 0, 0, 1, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1}
	if !bytes.Equal(v, want) {
		t.Fatalf("value % x, want % x", v, want)
	}
	k, v = Record{Key{Type: TypeMemberMetadata, Group: "g", Member: "m"}, &MemberMetadataValue{ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{"t"}}}.Encode()
	if want := []byte{0, 10, 0, 1, 'g', 0, 1, 'm'}; !bytes.Equal(k, want) {
		t.Fatalf("member key % x, want % x", k, want)
	}
	// version, null rack, "c", "h", ["t"], no tags
	if want := []byte{0, 0, 0, 2, 'c', 2, 'h', 2, 2, 't', 0}; !bytes.Equal(v, want) {
		t.Fatalf("member value % x, want % x", v, want)
	}
}

func TestDecodeOtherTypes(t *testing.T) {
	for _, typ := range []int16{0, 1, 2, 3, 8, 16} {
		if _, err := DecodeKey([]byte{0, byte(typ), 0, 1, 'g'}); err != ErrNotShareGroupRecord {
			t.Fatalf("type %d: %v", typ, err)
		}
	}
	mgr := NewManager(Config{})
	// Kafka 4.0's ShareGroupPartitionMetadata is skipped.
	if err := mgr.ReplayEncoded([]byte{0, 9, 0, 1, 'g'}, []byte{0, 0, 1, 0}); err != nil || len(mgr.Groups()) != 0 {
		t.Fatalf("type 9: %v %v", err, mgr.Groups())
	}
	if _, err := DecodeValue(TypeGroupMetadata, []byte{0, 1, 0, 0, 0, 1, 0}); err == nil {
		t.Fatal("value version 1 accepted")
	}
}

func FuzzDecode(f *testing.F) {
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
			t.Fatalf("re-decode: %v", err)
		}
		k3, v3 := again.Encode()
		if !bytes.Equal(k2, k3) || !bytes.Equal(v2, v3) {
			t.Fatalf("not stable:\n%v\n%v", rec, again)
		}
		mgr := NewManager(Config{})
		_ = mgr.Replay(rec)
	})
}
