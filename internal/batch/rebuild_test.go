package batch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
)

// record is a batch.Record copied out of its callback.
type record struct {
	OffsetDelta    int32
	TimestampDelta int64
	Key, Value     []byte
	Headers        []batch.RecordHeader
}

func readRecords(t *testing.T, b []byte) []record {
	t.Helper()
	var out []record
	err := batch.Records(b, func(r batch.Record) bool {
		c := record{OffsetDelta: r.OffsetDelta, TimestampDelta: r.TimestampDelta}
		if r.Key != nil {
			c.Key = append([]byte{}, r.Key...)
		}
		if r.Value != nil {
			c.Value = append([]byte{}, r.Value...)
		}
		for _, h := range r.Headers {
			var v []byte
			if h.Value != nil {
				v = append([]byte{}, h.Value...)
			}
			c.Headers = append(c.Headers, batch.RecordHeader{Key: h.Key, Value: v})
		}
		out = append(out, c)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// setAttrs sets attribute bits on a whole batch and fixes the CRC.
func setAttrs(b []byte, bits int16) {
	a := int16(binary.BigEndian.Uint16(b[21:])) | bits
	binary.BigEndian.PutUint16(b[21:], uint16(a))
	binary.BigEndian.PutUint32(b[17:], batch.ComputeCRC(b))
}

// rebuildInputs are batches with every field a rebuild must keep set to
// something other than its default.
func rebuildInputs(c batch.Codec) map[string][]byte {
	var recs []batchtest.Record
	for i := range 40 {
		recs = append(recs, batchtest.Record{
			Key:            fmt.Appendf(nil, "key-%d", i),
			Value:          bytes.Repeat([]byte{byte('a' + i%26)}, 50+i*37),
			TimestampDelta: int64(i*i - 300),
			Headers: []kmsg.Header{
				{Key: "trace", Value: fmt.Appendf(nil, "t%d", i)},
				{Key: "null", Value: nil},
				{Key: "", Value: []byte{}},
			},
		})
	}
	recs[0].Key = nil            // null key
	recs[1].Value = nil          // null value (tombstone)
	recs[2].Key = []byte{}       // empty key
	recs[3].Headers = nil        // no headers
	recs[4].TimestampDelta = 1e6 // the max timestamp
	// Large enough for several 32 KiB snappy blocks and 64 KiB lz4 blocks.
	recs[5].Value = bytes.Repeat([]byte("0123456789abcdef"), 12_000)
	opts := batchtest.Options{
		Codec: c, BaseOffset: 1234, BaseTimestamp: 1_700_000_000_000, LeaderEpoch: 17,
		Idempotent: true, ProducerID: 4242, ProducerEpoch: 3, BaseSequence: 99,
	}
	plain := batchtest.Build(opts, recs)

	// A transactional batch stamped LogAppendTime.
	txn := batchtest.Build(opts, recs)
	setAttrs(txn, 0x10)
	if _, err := batch.SetMaxTimestamp(txn, true, 1_800_000_000_000); err != nil {
		panic(err)
	}
	// A control batch without a producer id and with no timestamp.
	opts.Idempotent, opts.BaseTimestamp = false, -1
	ctrl := batchtest.Build(opts, recs[:3])
	setAttrs(ctrl, 0x20)
	return map[string][]byte{"plain": plain, "txn-lat": txn, "control": ctrl}
}

func TestRebuildEveryCodecPair(t *testing.T) {
	for _, from := range codecs {
		for name, in := range rebuildInputs(from) {
			before, ts0, err := batch.ValidateTimestamps(in)
			if err != nil || before.Compression() != from {
				t.Fatalf("%v %s: input %+v: %v", from, name, before, err)
			}
			wantRecs := readRecords(t, in)
			for _, to := range codecs {
				t.Run(fmt.Sprintf("%v-to-%v/%s", from, to, name), func(t *testing.T) {
					orig := append([]byte(nil), in...)
					out, h, ts, err := batch.Rebuild(in, to, 0, nil)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(in, orig) {
						t.Fatal("Rebuild modified its input")
					}
					v, err := batch.Validate(out)
					if err != nil {
						t.Fatal("rebuilt batch does not validate:", err)
					}
					if v != h {
						t.Fatalf("returned header %+v, parsed %+v", h, v)
					}
					if ts != ts0 {
						t.Fatalf("timestamps %+v, want %+v", ts, ts0)
					}
					if h.Compression() != to || h.Size() != len(out) {
						t.Fatalf("codec %v size %d (len %d)", h.Compression(), h.Size(), len(out))
					}
					// Every header field is the input's but the length, the
					// codec bits and the CRC.
					want := before
					want.Length, want.CRC = h.Length, h.CRC
					want.Attributes = before.Attributes&^7 | int16(to)
					if h != want {
						t.Fatalf("header\n %+v, want\n %+v", h, want)
					}
					if from == to && to == batch.None && !bytes.Equal(out, in) {
						t.Fatal("none to none is not the same bytes")
					}
					if from != to && h.CRC == before.CRC {
						t.Fatal("CRC not recomputed")
					}
					if got := readRecords(t, out); !reflect.DeepEqual(got, wantRecs) {
						t.Fatal("records differ after the rebuild")
					}
					// The uncompressed records are the very same bytes.
					a, _, _, err1 := batch.Rebuild(in, batch.None, 0, nil)
					b, _, _, err2 := batch.Rebuild(out, batch.None, 0, nil)
					if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
						t.Fatalf("uncompressed records differ (%v, %v)", err1, err2)
					}
				})
			}
		}
	}
}

func TestRebuildSnappyIsXerialFramed(t *testing.T) {
	in := rebuildInputs(batch.None)["plain"]
	out, _, _, err := batch.Rebuild(in, batch.Snappy, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := out[batch.HeaderSize:]
	if !bytes.HasPrefix(p, []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}) {
		t.Fatalf("snappy payload starts % x, want the xerial header", p[:16])
	}
	blocks := 0
	for p = p[16:]; len(p) > 0; blocks++ {
		n := int(binary.BigEndian.Uint32(p))
		p = p[4+n:]
	}
	if raw := len(in) - batch.HeaderSize; blocks != (raw+32<<10-1)/(32<<10) {
		t.Fatalf("%d blocks for %d bytes, want 32 KiB blocks", blocks, raw)
	}
}

func TestRebuildRefuses(t *testing.T) {
	good := batchtest.Build(batchtest.Options{Codec: batch.Gzip}, batchtest.Values("a", "b"))
	if _, _, _, err := batch.Rebuild(good, batch.Codec(5), 0, nil); !errors.Is(err, batch.ErrCodec) {
		t.Fatalf("codec 5: %v", err)
	}
	if _, _, _, err := batch.Rebuild(good, batch.Codec(-1), 0, nil); !errors.Is(err, batch.ErrCodec) {
		t.Fatalf("codec -1: %v", err)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)-2] ^= 0xff
	if out, _, _, err := batch.Rebuild(bad, batch.None, 0, nil); err == nil || out != nil {
		t.Fatalf("corrupt batch rebuilt (%v)", err)
	}
	// A flipped byte in an uncompressed value: only the CRC can tell.
	flipped := batchtest.Build(batchtest.Options{}, batchtest.Values("abc"))
	flipped[len(flipped)-2] ^= 0x01
	if err := batch.Records(flipped, nil); err != nil {
		t.Fatal("the flip should leave the records parsable:", err)
	}
	if _, _, _, err := batch.Rebuild(flipped, batch.Gzip, 0, nil); !errors.Is(err, batch.ErrCorrupt) {
		t.Fatalf("bad CRC: %v", err)
	}
	// No records (a valid CRC over an empty batch).
	empty := batchtest.Build(batchtest.Options{}, nil)
	if _, _, _, err := batch.Rebuild(empty, batch.Zstd, 0, nil); !errors.Is(err, batch.ErrCorrupt) {
		t.Fatalf("empty batch: %v", err)
	}
	// Garbage records under a valid CRC: only the record scan can tell.
	garbage := batchtest.Build(batchtest.Options{}, batchtest.Values("abc"))
	garbage[len(garbage)-1] = 0x7f
	binary.BigEndian.PutUint32(garbage[17:], batch.ComputeCRC(garbage))
	if _, _, _, err := batch.Rebuild(garbage, batch.Zstd, 0, nil); !errors.Is(err, batch.ErrCorrupt) {
		t.Fatalf("garbage records: %v", err)
	}
	for name, in := range map[string][]byte{"empty": nil, "short": good[:30], "trailing": append(append([]byte(nil), good...), 0)} {
		if _, _, _, err := batch.Rebuild(in, batch.LZ4, 0, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}

	// check sees the validated header and timestamps; its error stops the
	// rebuild.
	recs := batchtest.Values("a", "b")
	recs[1].TimestampDelta = 5
	b := batchtest.Build(batchtest.Options{Codec: batch.Snappy, BaseTimestamp: 100}, recs)
	stop := errors.New("stop")
	var seen batch.Timestamps
	out, _, _, err := batch.Rebuild(b, batch.Gzip, 0, func(h batch.Header, ts batch.Timestamps) error {
		if h.Compression() != batch.Snappy || h.NumRecords != 2 {
			t.Errorf("check got header %+v", h)
		}
		seen = ts
		return stop
	})
	if !errors.Is(err, stop) || out != nil {
		t.Fatalf("check error: %v, out %d bytes", err, len(out))
	}
	if seen != (batch.Timestamps{Min: 100, Max: 105, Any: true}) {
		t.Fatalf("check saw %+v", seen)
	}
}

func TestRebuildLimit(t *testing.T) {
	zeros := batchtest.Build(batchtest.Options{Codec: batch.Zstd}, batchtest.Values(string(make([]byte, 5000))))
	full, _, _, err := batch.Rebuild(zeros, batch.None, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _, err := batch.Rebuild(zeros, batch.None, len(full), nil); err != nil || !bytes.Equal(out, full) {
		t.Fatalf("at the limit: %v", err)
	}
	out, _, _, err := batch.Rebuild(zeros, batch.None, len(full)-1, nil)
	var tl *batch.TooLargeError
	if !errors.As(err, &tl) || tl.Size != len(full) || tl.Limit != len(full)-1 || out != nil {
		t.Fatalf("one byte over the limit: %v", err)
	}
	// The limit is on the rebuilt size, not the input's.
	if _, _, _, err := batch.Rebuild(full, batch.Gzip, len(zeros)+100, nil); err != nil {
		t.Fatalf("uncompressed input above the limit, gzip output below: %v", err)
	}
}

func FuzzRebuild(f *testing.F) {
	for _, c := range codecs {
		f.Add(batchtest.Build(batchtest.Options{Codec: c}, batchtest.Values("x", "yy", "")), uint8(c+1), uint16(0))
	}
	f.Add(batchtest.Build(batchtest.Options{Codec: batch.Gzip}, batchtest.Values(string(make([]byte, 300)))), uint8(0), uint16(200))
	f.Add([]byte{}, uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, c uint8, limit uint16) {
		to := batch.Codec(c % 6) // 5 is not a codec
		orig := append([]byte(nil), b...)
		vh, vts, verr := batch.ValidateTimestamps(b)
		out, h, ts, err := batch.Rebuild(b, to, int(limit), nil)
		if !bytes.Equal(b, orig) {
			t.Fatal("Rebuild modified its input")
		}
		if tl := (*batch.TooLargeError)(nil); errors.As(err, &tl) {
			full, _, _, ferr := batch.Rebuild(b, to, 0, nil)
			if ferr != nil || len(full) != tl.Size || tl.Size <= int(limit) || limit == 0 || out != nil {
				t.Fatalf("%v, but without a limit %d bytes (%v)", err, len(full), ferr)
			}
			return
		}
		if limit > 0 && len(out) > int(limit) {
			t.Fatalf("%d bytes rebuilt with limit %d", len(out), limit)
		}
		if to > batch.Zstd {
			if !errors.Is(err, batch.ErrCodec) {
				t.Fatalf("codec %d: %v", to, err)
			}
			return
		}
		if (err == nil) != (verr == nil) {
			t.Fatalf("Rebuild %v, Validate %v", err, verr)
		}
		if err != nil {
			if out != nil {
				t.Fatal("output with an error")
			}
			return
		}
		got, gerr := batch.Validate(out)
		if gerr != nil || got != h || h.Compression() != to || ts != vts {
			t.Fatalf("rebuilt batch: %+v (%v), returned %+v, ts %+v want %+v", got, gerr, h, ts, vts)
		}
		want := vh
		want.Length, want.CRC, want.Attributes = h.Length, h.CRC, vh.Attributes&^7|int16(to)
		if h != want {
			t.Fatalf("header %+v, want %+v", h, want)
		}
		a, _, _, err1 := batch.Rebuild(b, batch.None, 0, nil)
		r, _, _, err2 := batch.Rebuild(out, batch.None, 0, nil)
		if err1 != nil || err2 != nil || !bytes.Equal(a, r) {
			t.Fatalf("records changed (%v, %v)", err1, err2)
		}
	})
}
