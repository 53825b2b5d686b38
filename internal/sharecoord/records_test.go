package sharecoord

import (
	"reflect"
	"testing"

	"github.com/sluice-io/sluice/internal/share"
)

func testKey(p int32) share.Key {
	return share.Key{Group: "g", TopicID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Partition: p}
}

func TestRecordRoundTrip(t *testing.T) {
	batches := []share.StateBatch{{FirstOffset: 5, LastOffset: 9, DeliveryState: share.StateAcknowledged, DeliveryCount: 1},
		{FirstOffset: 10, LastOffset: 10, DeliveryState: share.StateAvailable, DeliveryCount: 3}}
	for _, r := range []Record{
		{Type: TypeSnapshot, Key: testKey(3), SnapshotEpoch: 2, StateEpoch: 4, LeaderEpoch: 7, StartOffset: 5,
			DeliveryCompleteCount: 5, CreateTimestamp: 1000, WriteTimestamp: 2000, Batches: batches},
		{Type: TypeSnapshot, Key: testKey(0), StartOffset: 0, LeaderEpoch: -1, DeliveryCompleteCount: -1},
		{Type: TypeUpdate, Key: testKey(1), SnapshotEpoch: 2, LeaderEpoch: 8, StartOffset: -1, DeliveryCompleteCount: 12, Batches: batches},
		{Type: TypeUpdate, Key: testKey(1), LeaderEpoch: 8, StartOffset: 6, DeliveryCompleteCount: -1},
		{Type: TypeSnapshot, Key: testKey(2), Tombstone: true},
		{Type: TypeUpdate, Key: share.Key{Group: "a:b:c", Partition: 1 << 30}, Tombstone: true},
	} {
		got, err := DecodeRecord(r.EncodeKey(), r.EncodeValue())
		if err != nil {
			t.Fatalf("decode %+v: %v", r, err)
		}
		if r.Tombstone {
			r.DeliveryCompleteCount = 0
		}
		if !r.Tombstone && r.Type == TypeUpdate {
			r.StateEpoch, r.CreateTimestamp, r.WriteTimestamp = 0, 0, 0
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

// TestRecordBytes pins the encoding of a ShareUpdateKey and value to the
// layout of Kafka's generated serializers.
func TestRecordBytes(t *testing.T) {
	r := Record{Type: TypeUpdate, Key: share.Key{Group: "g", Partition: 2}, SnapshotEpoch: 1, LeaderEpoch: 3, StartOffset: 4,
		DeliveryCompleteCount: -1, Batches: []share.StateBatch{{FirstOffset: 4, LastOffset: 5, DeliveryState: 2, DeliveryCount: 1}}}
	wantKey := append([]byte{0, 1, 0, 1, 'g'}, make([]byte, 16)...)
	wantKey = append(wantKey, 0, 0, 0, 2)
	if got := r.EncodeKey(); !reflect.DeepEqual(got, wantKey) {
		t.Fatalf("key = %x, want %x", got, wantKey)
	}
	wantValue := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4,
		2, // compact array of one batch
		0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 5, 2, 0, 1, 0,
		0} // no tagged fields
	if got := r.EncodeValue(); !reflect.DeepEqual(got, wantValue) {
		t.Fatalf("value = %x, want %x", got, wantValue)
	}
	r.DeliveryCompleteCount = 7
	v := r.EncodeValue()
	if tail := v[len(v)-7:]; !reflect.DeepEqual(tail, []byte{1, 0, 4, 0, 0, 0, 7}) {
		t.Fatalf("tagged DeliveryCompleteCount = %x", tail)
	}
}

func TestCoordinatorKey(t *testing.T) {
	k := share.Key{Group: "grp", TopicID: [16]byte{0xff}, Partition: 7}
	ck := CoordinatorKey(k)
	if ck != "grp:_wAAAAAAAAAAAAAAAAAAAA:7" {
		t.Fatalf("CoordinatorKey = %q", ck)
	}
	if !ValidCoordinatorKey(ck) || !ValidCoordinatorKey("a:b:"+ck) {
		t.Fatal("valid key rejected")
	}
	for _, bad := range []string{"", "grp", "grp:x:1", ":_wAAAAAAAAAAAAAAAAAAAA:7", "grp:_wAAAAAAAAAAAAAAAAAAAA:-1", "grp:_wAAAAAAAAAAAAAAAAAAAA:x"} {
		if ValidCoordinatorKey(bad) {
			t.Fatalf("ValidCoordinatorKey(%q) = true", bad)
		}
	}
	if p := PartitionFor(ck, 50); p < 0 || p >= 50 {
		t.Fatalf("PartitionFor = %d", p)
	}
}

func FuzzDecode(f *testing.F) {
	r := Record{Type: TypeSnapshot, Key: testKey(1), StartOffset: 3, DeliveryCompleteCount: 2,
		Batches: []share.StateBatch{{FirstOffset: 3, LastOffset: 4, DeliveryState: 2, DeliveryCount: 1}}}
	f.Add(r.EncodeKey(), r.EncodeValue())
	r.Type = TypeUpdate
	f.Add(r.EncodeKey(), r.EncodeValue())
	f.Add([]byte{0, 1}, []byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		rec, err := DecodeRecord(key, value)
		if err != nil {
			return
		}
		// What decodes encodes back to a record that decodes the same.
		again, err := DecodeRecord(rec.EncodeKey(), rec.EncodeValue())
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(again, rec) {
			t.Fatalf("re-decode differs:\n%+v\n%+v", again, rec)
		}
		st := NewState(2)
		st.Apply(rec)
	})
}

// kafkaSnapshotValue builds a ShareSnapshotValue v0 as Kafka 4.2's
// generated serializer lays it out (share-coordinator
// ShareSnapshotValue.json: SnapshotEpoch, StateEpoch, LeaderEpoch int32;
// StartOffset, CreateTimestamp, WriteTimestamp int64; StateBatches a
// compact array of FirstOffset, LastOffset int64, DeliveryState int8,
// DeliveryCount int16 and their tagged fields; then the tagged fields,
// DeliveryCompleteCount as tag 0). extra adds tagged fields a newer
// writer could add (tag 9 in the first batch, tag 5 at the end).
func kafkaSnapshotValue(extra bool) []byte {
	be := func(b []byte, v uint64, n int) []byte {
		for i := n - 1; i >= 0; i-- {
			b = append(b, byte(v>>(8*i)))
		}
		return b
	}
	b := be(nil, 0, 2) // value version
	b = be(b, 9, 4)    // SnapshotEpoch
	b = be(b, 2, 4)    // StateEpoch
	b = be(b, 11, 4)   // LeaderEpoch
	b = be(b, 100, 8)  // StartOffset
	b = be(b, 1700, 8) // CreateTimestamp
	b = be(b, 1800, 8) // WriteTimestamp
	b = append(b, 2+1) // two batches
	b = be(b, 100, 8)  // FirstOffset
	b = be(b, 104, 8)  // LastOffset
	b = append(b, 4)   // DeliveryState Archived
	b = be(b, 300, 2)  // DeliveryCount
	if extra {
		b = append(b, 1, 9, 1, 0xee) // one unknown tagged field
	} else {
		b = append(b, 0)
	}
	b = be(b, 105, 8)
	b = be(b, 105, 8)
	b = append(b, 0) // Available
	b = be(b, 2, 2)
	b = append(b, 0) // no tagged fields
	if !extra {
		b = append(b, 1, 0, 4) // one tagged field: DeliveryCompleteCount
		return be(b, 5, 4)
	}
	b = append(b, 2, 0, 4) // two: DeliveryCompleteCount
	b = be(b, 5, 4)
	return append(b, 5, 2, 1, 2) // and an unknown one
}

// TestSnapshotValueKafkaLayout: a ShareSnapshotKey and value built per
// Kafka's schemas decode to the record, unknown tagged fields skipped, and
// the record encodes back to Kafka's bytes.
func TestSnapshotValueKafkaLayout(t *testing.T) {
	id := testKey(0).TopicID
	key := append([]byte{0, 0, 0, 2, 'g', '1'}, id[:]...)
	key = append(key, 0, 0, 0, 7)
	want := Record{Type: TypeSnapshot, Key: share.Key{Group: "g1", TopicID: id, Partition: 7},
		SnapshotEpoch: 9, StateEpoch: 2, LeaderEpoch: 11, StartOffset: 100, CreateTimestamp: 1700, WriteTimestamp: 1800,
		DeliveryCompleteCount: 5, Batches: []share.StateBatch{
			{FirstOffset: 100, LastOffset: 104, DeliveryState: share.StateArchived, DeliveryCount: 300},
			{FirstOffset: 105, LastOffset: 105, DeliveryState: share.StateAvailable, DeliveryCount: 2}}}
	for _, extra := range []bool{false, true} {
		got, err := DecodeRecord(key, kafkaSnapshotValue(extra))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded (extra tags %v)\n %+v\nwant\n %+v", extra, got, want)
		}
	}
	if k := want.EncodeKey(); !reflect.DeepEqual(k, key) {
		t.Fatalf("key = %x, want %x", k, key)
	}
	if v := want.EncodeValue(); !reflect.DeepEqual(v, kafkaSnapshotValue(false)) {
		t.Fatalf("value =\n %x\nwant\n %x", v, kafkaSnapshotValue(false))
	}
}
