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
