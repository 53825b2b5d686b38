package batch

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeRecords encodes records as a producer puts them in an
// uncompressed batch, with offset deltas 0, 1, 2, ...
func encodeRecords(recs []kmsg.Record) []byte {
	var raw []byte
	for i := range recs {
		r := recs[i]
		r.OffsetDelta = int32(i)
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a zero length is one varint byte
		raw = r.AppendTo(raw)
	}
	return raw
}

// checkRecordsCases are records whose fields need varints of one, two
// and three bytes, null and empty keys, values and header values.
func checkRecordsCases() []kmsg.Record {
	return []kmsg.Record{
		{Value: []byte("v")},
		{Key: []byte{}, Value: nil, TimestampDelta64: -1},
		{Key: []byte("k"), Value: bytes.Repeat([]byte{'a'}, 63), TimestampDelta64: 63},
		{Key: bytes.Repeat([]byte{'k'}, 64), Value: bytes.Repeat([]byte{'b'}, 200), TimestampDelta64: 64},
		{Value: bytes.Repeat([]byte{'c'}, 9000), TimestampDelta64: 1 << 40,
			Headers: []kmsg.Header{{Key: "h", Value: nil}, {Key: "", Value: []byte("x")}}},
		{Key: []byte("kk"), Value: []byte("vv"), TimestampDelta64: -1 << 50,
			Headers: []kmsg.Header{{Key: "trace", Value: bytes.Repeat([]byte{'t'}, 130)}}},
	}
}

// TestCheckRecordsMatchesParse checks the produce path's record check
// (checkRecords, reading varints in place) against the decoding one
// (parseRecord through a callback) on valid records and on many corrupted
// copies of them: the same verdict and the same timestamps, always.
func TestCheckRecordsMatchesParse(t *testing.T) {
	recs := checkRecordsCases()
	raw := encodeRecords(recs)
	rng := rand.New(rand.NewPCG(1, 2))
	compare := func(h Header, data []byte) bool {
		t.Helper()
		var fast, slow Timestamps
		errFast := checkRecords(h, data, &fast)
		errSlow := scanRecords(h, data, &slow, true, func(Record) bool { return true })
		if (errFast == nil) != (errSlow == nil) || (errFast == nil && fast != slow) {
			t.Fatalf("records % x (count %d, last delta %d): checkRecords %v %+v, parse %v %+v",
				data, h.NumRecords, h.LastOffsetDelta, errFast, fast, errSlow, slow)
		}
		return errFast == nil
	}
	valid := Header{BaseTimestamp: 1000, NumRecords: int32(len(recs)), LastOffsetDelta: int32(len(recs) - 1)}
	if !compare(valid, raw) {
		t.Fatal("valid records refused")
	}
	accepted := 0
	for i := 0; i < 200000; i++ {
		h := valid
		data := append([]byte(nil), raw...)
		switch rng.IntN(6) {
		case 0: // a byte changed
			data[rng.IntN(len(data))] = byte(rng.Uint32())
		case 1: // a byte changed to a varint continuation or terminal
			data[rng.IntN(len(data))] ^= 0x80
		case 2: // cut short
			data = data[:rng.IntN(len(data))]
		case 3: // a byte more
			data = append(data, byte(rng.Uint32()))
		case 4: // the header's count or last delta off
			h.NumRecords += int32(rng.IntN(3)) - 1
			h.LastOffsetDelta += int32(rng.IntN(3)) - 1
		case 5: // a few bytes of a short record changed
			for range 3 {
				data[rng.IntN(min(len(data), 40))] = byte(rng.Uint32())
			}
		}
		if compare(h, data) {
			accepted++
		}
	}
	if accepted == 0 {
		t.Fatal("no corrupted copy was accepted: the cases do not reach the checks past the first field")
	}
}

// randomRecords encodes n records field by field, each field mostly
// valid: an offset delta other than the record's index, a null header
// key, a length that runs past the record or stops short of it, trailing
// bytes.
func randomRecords(rng *rand.Rand, n int) []byte {
	bytesField := func(b []byte, null bool, size int) []byte {
		if null {
			return binary.AppendVarint(b, -1)
		}
		b = binary.AppendVarint(b, int64(size))
		return append(b, bytes.Repeat([]byte{'x'}, size)...)
	}
	sizes := []int{0, 1, 63, 64, 200, 8191, 8192, 9000}
	size := func() int { return sizes[rng.IntN(len(sizes))] }
	rare := func() bool { return rng.IntN(40) == 0 }
	var raw []byte
	for i := range n {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, rng.Int64N(1<<20)-1<<19)
		off := int64(i)
		if rare() {
			off += int64(rng.IntN(3)) - 1
		}
		body = binary.AppendVarint(body, off)
		body = bytesField(body, rng.IntN(2) == 0, size())
		body = bytesField(body, rng.IntN(4) == 0, size())
		nh := rng.IntN(3)
		body = binary.AppendVarint(body, int64(nh))
		for range nh {
			body = bytesField(body, rare(), rng.IntN(3))
			body = bytesField(body, rng.IntN(3) == 0, size())
		}
		if rare() {
			body = append(body, 0)
		}
		length := int64(len(body))
		if rare() {
			length += int64(rng.IntN(3)) - 1
		}
		raw = binary.AppendVarint(raw, length)
		raw = append(raw, body...)
	}
	return raw
}

// TestCheckRecordsMatchesParseRandom is TestCheckRecordsMatchesParse on
// records built field by field (randomRecords).
func TestCheckRecordsMatchesParseRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	verdicts := map[bool]int{}
	for range 20000 {
		n := 1 + rng.IntN(4)
		data := randomRecords(rng, n)
		h := Header{BaseTimestamp: rng.Int64N(1 << 41), NumRecords: int32(n), LastOffsetDelta: int32(n - 1)}
		var fast, slow Timestamps
		errFast := checkRecords(h, data, &fast)
		errSlow := scanRecords(h, data, &slow, true, func(Record) bool { return true })
		if (errFast == nil) != (errSlow == nil) || (errFast == nil && fast != slow) {
			t.Fatalf("records % x (count %d): checkRecords %v %+v, parse %v %+v", data, n, errFast, fast, errSlow, slow)
		}
		verdicts[errFast == nil]++
	}
	if verdicts[true] == 0 || verdicts[false] == 0 {
		t.Fatalf("verdicts %v: the cases should be both accepted and refused", verdicts)
	}
}
