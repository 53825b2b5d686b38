package producer

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestCheckSequence(t *testing.T) {
	s := NewState()
	// Unknown producer: any sequence is accepted.
	if dup, err := s.Check(7, 0, 42, 44); dup != nil || err != nil {
		t.Fatal(dup, err)
	}
	s.Update(7, 0, Batch{FirstSeq: 0, LastSeq: 4, FirstOffset: 100, LastOffset: 104})
	if _, err := s.Check(7, 0, 5, 9); err != nil {
		t.Fatal("next in sequence rejected:", err)
	}
	if _, err := s.Check(7, 0, 6, 9); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatal("gap accepted:", err)
	}
	dup, err := s.Check(7, 0, 0, 4)
	if err != nil || dup == nil || dup.FirstOffset != 100 || dup.LastOffset != 104 {
		t.Fatal("duplicate not reported with its original offsets:", dup, err)
	}
	if _, err := s.Check(7, -1, 5, 9); err != nil && !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatal(err)
	}
	s.Update(7, 2, Batch{FirstSeq: 0, LastSeq: 0, FirstOffset: 105, LastOffset: 105})
	if _, err := s.Check(7, 1, 1, 1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatal("older epoch accepted:", err)
	}
	if _, err := s.Check(7, 3, 5, 5); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatal("new epoch must start at 0:", err)
	}
	if _, err := s.Check(7, 3, 0, 5); err != nil {
		t.Fatal(err)
	}
}

func TestRetainsFiveBatches(t *testing.T) {
	s := NewState()
	for i := int32(0); i < 8; i++ {
		s.Update(1, 0, Batch{FirstSeq: i, LastSeq: i, FirstOffset: int64(i), LastOffset: int64(i)})
	}
	if dup, _ := s.Check(1, 0, 2, 2); dup != nil {
		t.Fatal("batch older than the last five reported as duplicate")
	}
	if dup, _ := s.Check(1, 0, 3, 3); dup == nil || dup.FirstOffset != 3 {
		t.Fatal("fifth-newest batch not deduplicated")
	}
}

func TestWrapAround(t *testing.T) {
	s := NewState()
	s.Update(1, 0, Batch{FirstSeq: math.MaxInt32 - 1, LastSeq: math.MaxInt32})
	if _, err := s.Check(1, 0, 0, 3); err != nil {
		t.Fatal("sequence must wrap to 0:", err)
	}
}

func TestTruncateFrom(t *testing.T) {
	s := NewState()
	s.Update(1, 0, Batch{FirstSeq: 0, LastSeq: 0, FirstOffset: 0, LastOffset: 0})
	s.Update(1, 0, Batch{FirstSeq: 1, LastSeq: 1, FirstOffset: 5, LastOffset: 5})
	s.Update(2, 0, Batch{FirstSeq: 0, LastSeq: 0, FirstOffset: 6, LastOffset: 6})
	s.TruncateFrom(5)
	// The truncated batch must be appended again on retry, not deduplicated.
	if dup, err := s.Check(1, 0, 1, 1); dup != nil || err != nil {
		t.Fatal("truncated batch still treated as duplicate:", dup, err)
	}
	if s.Get(2) != nil {
		t.Fatal("producer with only truncated batches should be forgotten")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := NewState()
	s.Update(1, 3, Batch{FirstSeq: 0, LastSeq: 9, FirstOffset: 0, LastOffset: 9, MaxTime: 1000})
	s.Update(-5, 0, Batch{}) // ignored: no producer id
	s.Update(9, 0, Batch{FirstSeq: 1, LastSeq: 1, FirstOffset: 10, LastOffset: 10, MaxTime: 2000})
	d, err := Decode(s.Encode())
	if err != nil || !reflect.DeepEqual(d.m, s.m) {
		t.Fatalf("%v\n%+v\n%+v", err, d.m, s.m)
	}
	enc := s.Encode()
	enc[10] ^= 1
	if _, err := Decode(enc); err == nil {
		t.Fatal("corrupt snapshot accepted")
	}
}

func FuzzDecode(f *testing.F) {
	s := NewState()
	s.Update(1, 3, Batch{FirstSeq: 0, LastSeq: 9, FirstOffset: 0, LastOffset: 9})
	f.Add(s.Encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := Decode(data)
		if err != nil {
			return
		}
		if _, err := Decode(st.Encode()); err != nil {
			t.Fatal("re-encoded snapshot does not decode")
		}
	})
}
