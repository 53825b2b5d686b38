package remote

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sluice-io/sluice/internal/epoch"
)

func testSegment() Segment {
	return Segment{
		Partition:      Partition{TopicID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Topic: "orders", Partition: 7},
		ID:             [16]byte{0xff, 1, 0xfe, 2},
		StartOffset:    100,
		EndOffset:      199,
		MaxTimestamp:   1700000000123,
		BrokerID:       3,
		EventTimestamp: 1700000000456,
		LeaderEpochs:   []epoch.Entry{{Epoch: 2, StartOffset: 100}, {Epoch: 5, StartOffset: 150}},
		SizeBytes:      4096,
		TxnIndexEmpty:  true,
		State:          CopyStarted,
	}
}

func TestRecordRoundTrip(t *testing.T) {
	s := testSegment()
	for _, txnEmpty := range []bool{true, false} {
		s.TxnIndexEmpty = txnEmpty
		rec, err := Decode(EncodeSegment(&s))
		if err != nil || rec.Kind != KindSegment || !reflect.DeepEqual(*rec.Segment, s) {
			t.Fatalf("segment: %+v %v, want %+v", rec.Segment, err, s)
		}
	}
	u := Update{Partition: s.Partition, ID: s.ID, BrokerID: 2, EventTimestamp: 99, State: DeleteStarted}
	rec, err := Decode(EncodeUpdate(&u))
	if err != nil || rec.Kind != KindSegmentUpdate || *rec.Update != u {
		t.Fatalf("update: %+v %v", rec.Update, err)
	}
	d := PartitionDelete{Partition: s.Partition, BrokerID: 1, EventTimestamp: 5, State: PartitionDeleteStarted}
	rec, err = Decode(EncodePartitionDelete(&d))
	if err != nil || rec.Kind != KindPartitionDelete || *rec.Delete != d {
		t.Fatalf("partition delete: %+v %v", rec.Delete, err)
	}
}

// TestRecordKafkaBytes pins the encoding to Kafka's: the frame (version
// 1, api key, record version 0) and a RemoteLogSegmentMetadataUpdateRecord
// laid out as its JSON schema says, byte by byte.
func TestRecordKafkaBytes(t *testing.T) {
	u := Update{Partition: Partition{TopicID: [16]byte{0: 0xaa, 15: 0xbb}, Topic: "t", Partition: 1}, ID: [16]byte{0: 0xcc, 15: 0xdd}, BrokerID: 2, EventTimestamp: 3, State: CopyFinished}
	want := []byte{1, 1, 0, // frame version 1, api key 1, version 0
		2, 't', // compact string "t"
		0xaa, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xbb, // topic id
		0, 0, 0, 1, // partition
		0,                                                    // TopicIdPartitionEntry tags
		0xcc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, // segment id
		0,          // RemoteLogSegmentIdEntry tags
		0, 0, 0, 2, // broker id
		0, 0, 0, 0, 0, 0, 0, 3, // event timestamp
		0, // custom metadata: null
		1, // state COPY_SEGMENT_FINISHED
		0, // tags
	}
	if got := EncodeUpdate(&u); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
	// Version 1 (Kafka 4.1+) adds tagged fields, which are read past.
	v1 := append([]byte{1, 1, 1}, want[3:len(want)-1]...)
	v1 = append(v1, 2, 0, 4, 0, 0, 0, 9, 1, 8, 0, 0, 0, 0, 0, 0, 0, 200)
	rec, err := Decode(v1)
	if err != nil || *rec.Update != u {
		t.Fatalf("version 1: %+v %v", rec.Update, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	s := testSegment()
	good := EncodeSegment(&s)
	for name, b := range map[string][]byte{
		"empty":         nil,
		"frame 0":       append([]byte{0}, good[1:]...),
		"api key 9":     append([]byte{1, 9}, good[2:]...),
		"version 2":     append([]byte{1, 0, 2}, good[3:]...),
		"truncated":     good[:len(good)-3],
		"trailing byte": append(append([]byte(nil), good...), 0),
	} {
		if _, err := Decode(b); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v, want ErrBadRecord", name, err)
		}
	}
}

// FuzzDecode: no input panics, and whatever decodes encodes back to the
// same record.
func FuzzDecode(f *testing.F) {
	s := testSegment()
	f.Add(EncodeSegment(&s))
	f.Add(EncodeUpdate(&Update{Partition: s.Partition, ID: s.ID, State: CopyFinished}))
	f.Add(EncodePartitionDelete(&PartitionDelete{Partition: s.Partition, State: PartitionDeleteMarked}))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := Decode(b)
		if err != nil {
			return
		}
		var again []byte
		switch {
		case rec.Segment != nil:
			if rec.Segment.SizeBytes < 0 {
				return // written clamped at zero
			}
			again = EncodeSegment(rec.Segment)
		case rec.Update != nil:
			again = EncodeUpdate(rec.Update)
		case rec.Delete != nil:
			again = EncodePartitionDelete(rec.Delete)
		}
		rec2, err := Decode(again)
		if err != nil || !reflect.DeepEqual(rec, rec2) {
			t.Fatalf("re-encoded record differs: %+v / %+v (%v)", rec, rec2, err)
		}
	})
}

// TestMurmur2 checks the hash against Kafka's UtilsTest.testMurmur2.
func TestMurmur2(t *testing.T) {
	for s, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := murmur2([]byte(s)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", s, got, want)
		}
	}
	p := Partition{TopicID: [16]byte{1, 2, 3}, Partition: 4}
	if a, b := MetadataPartition(p, 50), MetadataPartition(p, 50); a != b || a < 0 || a >= 50 {
		t.Fatalf("metadata partition %d %d", a, b)
	}
}
