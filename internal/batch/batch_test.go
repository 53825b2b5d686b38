package batch_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
)

var codecs = []batch.Codec{batch.None, batch.Gzip, batch.Snappy, batch.LZ4, batch.Zstd}

func TestRoundTripAllCodecs(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			var recs []batchtest.Record
			for i := 0; i < 50; i++ {
				recs = append(recs, batchtest.Record{
					Key:     []byte(fmt.Sprintf("k%d", i)),
					Value:   bytes.Repeat([]byte{byte(i)}, i*10),
					Headers: []kmsg.Header{{Key: "h", Value: []byte("v")}},
				})
			}
			recs[3].Key = nil
			recs[4].Value = nil
			b := batchtest.Build(batchtest.Options{Codec: c, BaseOffset: 7, Idempotent: true, ProducerID: 42, ProducerEpoch: 1, BaseSequence: 10}, recs)
			h, err := batch.Validate(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.BaseOffset != 7 || h.LastOffset() != 56 || h.NumRecords != 50 || h.Compression() != c {
				t.Fatalf("header %+v", h)
			}
			if h.ProducerID != 42 || h.ProducerEpoch != 1 || h.BaseSequence != 10 || h.LastSequence() != 59 {
				t.Fatalf("idempotence fields %+v", h)
			}
			i := 0
			err = batch.Records(b, func(r batch.Record) bool {
				want := recs[i]
				if !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) {
					t.Fatalf("record %d key %q want %q", i, r.Key, want.Key)
				}
				if !bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) {
					t.Fatalf("record %d value mismatch", i)
				}
				if len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != "v" {
					t.Fatalf("record %d headers %+v", i, r.Headers)
				}
				i++
				return true
			})
			if err != nil || i != 50 {
				t.Fatalf("records: %v after %d", err, i)
			}
		})
	}
}

func TestRewriteOutsideCRC(t *testing.T) {
	b := batchtest.Build(batchtest.Options{}, batchtest.Values("a", "b"))
	batch.SetBaseOffset(b, 1234)
	batch.SetLeaderEpoch(b, 9)
	if err := batch.CheckCRC(b); err != nil {
		t.Fatal("rewriting offset and epoch must not break the CRC:", err)
	}
	h, _ := batch.ParseHeader(b)
	if h.BaseOffset != 1234 || h.LeaderEpoch != 9 {
		t.Fatalf("%+v", h)
	}
}

func TestCorruption(t *testing.T) {
	good := batchtest.Build(batchtest.Options{Codec: batch.Gzip}, batchtest.Values("hello", "world"))
	cases := map[string]func(b []byte) []byte{
		"flipped record byte": func(b []byte) []byte { b[len(b)-3] ^= 0xff; return b },
		"truncated":           func(b []byte) []byte { return b[:len(b)-1] },
		"bad magic":           func(b []byte) []byte { b[16] = 1; return b },
		"huge length":         func(b []byte) []byte { b[8] = 0x7f; return b },
		"short":               func(b []byte) []byte { return b[:30] },
		"extra bytes":         func(b []byte) []byte { return append(b, 0) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			b := mutate(append([]byte(nil), good...))
			if _, err := batch.Validate(b); err == nil {
				t.Fatal("corrupt batch validated")
			}
		})
	}
}

func TestGarbageInsideCompressedBatchWithValidCRC(t *testing.T) {
	for _, c := range codecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			b := batchtest.Build(batchtest.Options{Codec: c}, batchtest.Values("hello", "world"))
			// Replace the compressed payload with garbage, then fix the CRC
			// so only decompression can notice.
			for i := batch.HeaderSize; i < len(b); i++ {
				b[i] = byte(i * 7)
			}
			b2 := append([]byte(nil), b...)
			copy(b2[17:21], []byte{0, 0, 0, 0})
			crc := batch.ComputeCRC(b2)
			b[17], b[18], b[19], b[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
			if err := batch.CheckCRC(b); err != nil {
				t.Fatal(err)
			}
			if _, err := batch.Validate(b); !errors.Is(err, batch.ErrCorrupt) {
				t.Fatalf("want ErrCorrupt, got %v", err)
			}
		})
	}
}

func TestCountMismatch(t *testing.T) {
	b := batchtest.Build(batchtest.Options{}, batchtest.Values("a", "b", "c"))
	b[60]-- // numRecords 3 -> 2, outside... inside the CRC: fix it
	crc := batch.ComputeCRC(b)
	b[17], b[18], b[19], b[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	if _, err := batch.Validate(b); err == nil {
		t.Fatal("record count mismatch accepted")
	}
}

func TestNextSplitsBatches(t *testing.T) {
	a := batchtest.Build(batchtest.Options{}, batchtest.Values("a"))
	b := batchtest.Build(batchtest.Options{BaseOffset: 1}, batchtest.Values("b", "c"))
	all := append(append([]byte(nil), a...), b...)
	h, first, rest, err := batch.Next(all)
	if err != nil || !bytes.Equal(first, a) || h.NextOffset() != 1 {
		t.Fatal(err)
	}
	h, second, rest, err := batch.Next(rest)
	if err != nil || !bytes.Equal(second, b) || len(rest) != 0 || h.NextOffset() != 3 {
		t.Fatal(err)
	}
	if _, _, _, err := batch.Next(all[:len(all)-2]); err != nil {
		t.Fatal("first batch is whole:", err)
	}
	_, _, rest, _ = batch.Next(all[:len(all)-2])
	if _, _, _, err := batch.Next(rest); !errors.Is(err, batch.ErrShort) {
		t.Fatalf("torn second batch: %v", err)
	}
}

func FuzzValidate(f *testing.F) {
	for _, c := range codecs {
		f.Add(batchtest.Build(batchtest.Options{Codec: c}, batchtest.Values("x", "yy", "")))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := batch.Validate(b)
		h2, ts, err2 := batch.ValidateTimestamps(b)
		if (err == nil) != (err2 == nil) || h != h2 {
			t.Fatalf("Validate %v, ValidateTimestamps %v", err, err2)
		}
		if err != nil {
			return
		}
		if ts.Any && ts.Min > ts.Max {
			t.Fatalf("timestamps %+v", ts)
		}
		// Anything that validates must iterate to exactly NumRecords.
		n := int32(0)
		if err := batch.Records(b, func(batch.Record) bool { n++; return true }); err != nil || n != h.NumRecords {
			t.Fatalf("validated batch does not iterate: %v, %d/%d", err, n, h.NumRecords)
		}
	})
}

func TestSetMaxTimestamp(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			recs := batchtest.Values("a", "b", "c")
			recs[1].TimestampDelta = 7
			b := batchtest.Build(batchtest.Options{Codec: c, BaseTimestamp: 1000, Idempotent: true, ProducerID: 3, BaseSequence: 4}, recs)
			before, err := batch.Validate(b)
			if err != nil {
				t.Fatal(err)
			}
			if before.LogAppendTime() || before.MaxTimestamp != 1007 {
				t.Fatalf("built batch %+v", before)
			}
			records := append([]byte(nil), b[batch.HeaderSize:]...)

			h, err := batch.SetMaxTimestamp(b, true, 5000)
			if err != nil {
				t.Fatal(err)
			}
			after, err := batch.Validate(b)
			if err != nil {
				t.Fatal("stamped batch does not validate:", err)
			}
			if after != h {
				t.Fatalf("returned header %+v, parsed %+v", h, after)
			}
			if !after.LogAppendTime() || after.MaxTimestamp != 5000 || after.Compression() != c {
				t.Fatalf("stamped header %+v", after)
			}
			// Only the attributes' timestamp bit, the max timestamp and the
			// CRC changed.
			want := before
			want.Attributes |= 0x08
			want.MaxTimestamp, want.CRC = 5000, after.CRC
			if after != want {
				t.Fatalf("header %+v, want %+v", after, want)
			}
			if after.CRC == before.CRC {
				t.Fatal("CRC not recomputed")
			}
			if !bytes.Equal(b[batch.HeaderSize:], records) {
				t.Fatal("records changed")
			}
			var deltas []int64
			if err := batch.Records(b, func(r batch.Record) bool { deltas = append(deltas, r.TimestampDelta); return true }); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(deltas) != "[0 7 0]" {
				t.Fatalf("timestamp deltas %v", deltas)
			}

			// Back to CreateTime with the records' max: the original bytes.
			if _, err := batch.SetMaxTimestamp(b, false, 1007); err != nil {
				t.Fatal(err)
			}
			if h, err := batch.Validate(b); err != nil || h != before {
				t.Fatalf("restored header %+v (%v), want %+v", h, err, before)
			}
		})
	}
}

func TestSetMaxTimestampUnchangedAndRefused(t *testing.T) {
	b := batchtest.Build(batchtest.Options{BaseTimestamp: 1000}, batchtest.Values("a"))
	orig := append([]byte(nil), b...)
	if _, err := batch.SetMaxTimestamp(b, false, 1000); err != nil || !bytes.Equal(b, orig) {
		t.Fatalf("no-op rewrite changed the batch (%v)", err)
	}
	// A corrupt batch is not laundered into a valid one.
	bad := append([]byte(nil), orig...)
	bad[len(bad)-1] ^= 0xff
	if _, err := batch.SetMaxTimestamp(bad, true, 1); !errors.Is(err, batch.ErrCorrupt) {
		t.Fatalf("corrupt batch: %v", err)
	}
	if err := batch.CheckCRC(bad); err == nil {
		t.Fatal("corrupt batch got a valid CRC")
	}
	for name, in := range map[string][]byte{
		"empty":       nil,
		"short":       orig[:20],
		"header only": orig[:batch.HeaderSize],
		"trailing":    append(append([]byte(nil), orig...), 0),
	} {
		if _, err := batch.SetMaxTimestamp(append([]byte(nil), in...), true, 1); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestValidateTimestamps(t *testing.T) {
	recs := batchtest.Values("a", "b", "c", "d")
	recs[1].TimestampDelta = -500
	recs[2].TimestampDelta = 300
	b := batchtest.Build(batchtest.Options{Codec: batch.Zstd, BaseTimestamp: 10_000}, recs)
	_, ts, err := batch.ValidateTimestamps(b)
	if err != nil || ts != (batch.Timestamps{Min: 9_500, Max: 10_300, Any: true}) {
		t.Fatalf("%+v %v", ts, err)
	}
	// Records without a timestamp (-1) are left out.
	recs = batchtest.Values("a", "b")
	recs[1].TimestampDelta = 5
	b = batchtest.Build(batchtest.Options{BaseTimestamp: -1}, recs)
	if _, ts, err := batch.ValidateTimestamps(b); err != nil || ts != (batch.Timestamps{Min: 4, Max: 4, Any: true}) {
		t.Fatalf("%+v %v", ts, err)
	}
	b = batchtest.Build(batchtest.Options{BaseTimestamp: -1}, batchtest.Values("a"))
	if _, ts, err := batch.ValidateTimestamps(b); err != nil || ts.Any {
		t.Fatalf("%+v %v", ts, err)
	}
	// A LogAppendTime batch: every record has the max timestamp.
	b = batchtest.Build(batchtest.Options{BaseTimestamp: 10_000}, batchtest.Values("a", "b"))
	if _, err := batch.SetMaxTimestamp(b, true, 77_777); err != nil {
		t.Fatal(err)
	}
	if _, ts, err := batch.ValidateTimestamps(b); err != nil || ts != (batch.Timestamps{Min: 77_777, Max: 77_777, Any: true}) {
		t.Fatalf("%+v %v", ts, err)
	}
}

func FuzzSetMaxTimestamp(f *testing.F) {
	for _, c := range codecs {
		f.Add(batchtest.Build(batchtest.Options{Codec: c}, batchtest.Values("x", "yy", "")), true, int64(123))
	}
	f.Add([]byte{}, false, int64(-1))
	f.Fuzz(func(t *testing.T, b []byte, lat bool, ts int64) {
		_, verr := batch.Validate(b)
		orig := append([]byte(nil), b...)
		h, err := batch.SetMaxTimestamp(b, lat, ts)
		if err != nil {
			if !bytes.Equal(b, orig) {
				t.Fatal("failed SetMaxTimestamp changed the bytes")
			}
			return
		}
		if h.LogAppendTime() != lat || h.MaxTimestamp != ts {
			t.Fatalf("header %+v after SetMaxTimestamp(%v, %d)", h, lat, ts)
		}
		// Bytes are only rewritten with a valid CRC, and only when their CRC
		// was valid.
		if !bytes.Equal(b, orig) && (batch.CheckCRC(orig) != nil || batch.CheckCRC(b) != nil) {
			t.Fatal("SetMaxTimestamp rewrote a batch without a valid CRC before and after")
		}
		if _, err := batch.Validate(b); (err == nil) != (verr == nil) {
			t.Fatalf("validity changed: before %v, after %v", verr, err)
		}
		if _, tss, err := batch.ValidateTimestamps(b); err == nil && lat && (ts == batch.NoTimestamp) == tss.Any {
			t.Fatalf("LogAppendTime batch timestamps %+v for max %d", tss, ts)
		}
	})
}

// FuzzParseMarker: a transaction marker read from the wire or the disk
// never panics, and one that parses re-encodes to the same marker.
func FuzzParseMarker(f *testing.F) {
	f.Add(batch.EncodeMarker(7, 1, batch.Marker{Commit: true, CoordinatorEpoch: 3}, 1000))
	f.Add(batch.EncodeMarker(7, 1, batch.Marker{}, 1000))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := batch.ParseMarker(data)
		if err != nil {
			return
		}
		h, _ := batch.ParseHeader(data)
		again, err := batch.ParseMarker(batch.EncodeMarker(h.ProducerID, h.ProducerEpoch, m, h.MaxTimestamp))
		if err != nil || again != m {
			t.Fatalf("marker %+v does not round-trip: %+v %v", m, again, err)
		}
	})
}
