package batch_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
)

type rec struct {
	off   int64
	key   string
	value []byte
	ts    int64
}

func readBack(t *testing.T, b []byte) (batch.Header, []rec) {
	t.Helper()
	h, err := batch.ParseHeader(b)
	if err != nil || h.Size() != len(b) {
		t.Fatalf("header: %v", err)
	}
	if err := batch.CheckCRC(b); err != nil {
		t.Fatal(err)
	}
	var out []rec
	err = batch.Records(b, func(r batch.Record) bool {
		out = append(out, rec{h.BaseOffset + int64(r.OffsetDelta), string(r.Key), bytes.Clone(r.Value), h.BaseTimestamp + r.TimestampDelta})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, out
}

func TestFilter(t *testing.T) {
	for _, codec := range []batch.Codec{batch.None, batch.Gzip, batch.Snappy, batch.LZ4, batch.Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			var rs []batchtest.Record
			for i := 0; i < 6; i++ {
				r := batchtest.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i)), TimestampDelta: int64(i * 10)}
				if i == 4 {
					r.Value = nil // a tombstone
				}
				rs = append(rs, r)
			}
			in := batchtest.Build(batchtest.Options{Codec: codec, BaseOffset: 100, BaseTimestamp: 5000, Idempotent: true, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 40, LeaderEpoch: 3}, rs)
			inH, _ := batch.ParseHeader(in)

			// Everything kept: the same bytes.
			out, kept, err := batch.Filter(in, func(int64, *batch.Record) bool { return true }, batch.FilterOptions{})
			if err != nil || kept != 6 || &out[0] != &in[0] {
				t.Fatalf("keep all: kept %d, err %v, copied %v", kept, err, &out[0] != &in[0])
			}
			// Odd offsets and the tombstone: offsets, producer fields and
			// the last offset delta stay; the horizon is set.
			keep := func(off int64, r *batch.Record) bool { return off%2 == 1 || r.Value == nil }
			out, kept, err = batch.Filter(in, keep, batch.FilterOptions{DeleteHorizon: 99999})
			if err != nil || kept != 4 {
				t.Fatalf("kept %d: %v", kept, err)
			}
			h, got := readBack(t, out)
			if h.BaseOffset != 100 || h.LastOffsetDelta != 5 || h.ProducerID != 7 || h.ProducerEpoch != 1 || h.BaseSequence != 40 ||
				h.LeaderEpoch != 3 || h.Compression() != codec || h.NumRecords != 4 || h.LastSequence() != inH.LastSequence() {
				t.Fatalf("header %+v", h)
			}
			if hz, ok := h.DeleteHorizon(); !ok || hz != 99999 {
				t.Fatalf("horizon %d %v", hz, ok)
			}
			want := []rec{{101, "k1", []byte("v1"), 5010}, {103, "k3", []byte("v3"), 5030}, {104, "k4", nil, 5040}, {105, "k5", []byte("v5"), 5050}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("records %v, want %v", got, want)
			}
			if h.MaxTimestamp != 5050 {
				t.Fatalf("max timestamp %d", h.MaxTimestamp)
			}
			// A second filter keeps the horizon and the timestamps.
			out2, _, err := batch.Filter(out, func(off int64, _ *batch.Record) bool { return off != 103 }, batch.FilterOptions{DeleteHorizon: 1})
			if err != nil {
				t.Fatal(err)
			}
			h2, got2 := readBack(t, out2)
			if hz, _ := h2.DeleteHorizon(); hz != 99999 || len(got2) != 3 || got2[1].ts != 5040 {
				t.Fatalf("refilter: %+v %v", h2, got2)
			}
			// Nothing kept: dropped, or an empty batch for the producer.
			none := func(int64, *batch.Record) bool { return false }
			if out, _, err := batch.Filter(in, none, batch.FilterOptions{}); err != nil || out != nil {
				t.Fatalf("drop: %v %v", out, err)
			}
			out, _, err = batch.Filter(in, none, batch.FilterOptions{KeepEmpty: true})
			if err != nil {
				t.Fatal(err)
			}
			h, got = readBack(t, out)
			if len(got) != 0 || h.NumRecords != 0 || h.NextOffset() != 106 || h.LastSequence() != inH.LastSequence() || len(out) != batch.HeaderSize {
				t.Fatalf("empty batch %+v, %d records", h, len(got))
			}
		})
	}
}

func TestFilterRejectsCorrupt(t *testing.T) {
	in := batchtest.Build(batchtest.Options{}, batchtest.Values("a", "b"))
	in[len(in)-1] ^= 0xff
	if _, _, err := batch.Filter(in[:len(in)-1], func(int64, *batch.Record) bool { return true }, batch.FilterOptions{}); err == nil {
		t.Fatal("short batch accepted")
	}
}
