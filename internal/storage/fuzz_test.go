package storage

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

// validLog returns the bytes of a small valid segment starting at offset 0.
func validLog() []byte {
	var out []byte
	var off int64
	for i := 0; i < 4; i++ {
		b := mkBatch(spec{records: 1 + i, valSize: 7 * i, ts: int64(1000 + i), pid: int64(i%2) - 1, seq: 0, fill: 'x'})
		batch.SetBaseOffset(b, off)
		batch.SetLeaderEpoch(b, int32(i/2))
		h, _ := batch.ParseHeader(b)
		off = h.NextOffset()
		out = append(out, b...)
	}
	return out
}

// FuzzRecover writes arbitrary bytes as a segment (and its offset index)
// and opens the log: Open must not panic, and after an unclean shutdown the
// recovered log must hold only valid, contiguous batches and accept appends.
// With clean set, the directory claims a clean shutdown, which exercises
// the trusted (index-based) load path on corrupt files.
func FuzzRecover(f *testing.F) {
	good := validLog()
	f.Add(good, []byte{}, false)
	f.Add(good, []byte{0, 0, 0, 1, 0, 0, 0, 80}, true)
	f.Add(good[:len(good)-3], []byte{}, false)
	f.Add(append(append([]byte(nil), good...), make([]byte, 100)...), []byte{}, true)
	flipped := append([]byte(nil), good...)
	flipped[70] ^= 0xff
	f.Add(flipped, []byte{}, false)
	f.Add([]byte{}, []byte{0xff, 0xff}, true)
	f.Fuzz(func(t *testing.T, data, index []byte, clean bool) {
		if len(data) > 1<<20 || len(index) > 1<<16 {
			return
		}
		fsys := vfs.NewMem()
		dir := "/d/t-0"
		fsys.MkdirAll(dir, 0o755)
		write := func(name string, b []byte) {
			fl, _ := fsys.Create(dir + "/" + name)
			fl.Write(b)
			fl.Close()
		}
		write("00000000000000000000.log", data)
		write("00000000000000000000.index", index)
		if clean {
			write(cleanShutdownName, nil)
		}
		cfg := DefaultConfig()
		cfg.SegmentBytes = 1 << 12
		l, err := Open(fsys, dir, cfg, t0)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if l.LogStartOffset() > l.LogEndOffset() {
			t.Fatalf("start %d > end %d", l.LogStartOffset(), l.LogEndOffset())
		}
		if !clean {
			readAll(t, l)
		}
		for off := l.LogStartOffset(); off <= l.LogEndOffset() && off < l.LogStartOffset()+50; off++ {
			if _, err := l.Read(off, 100, 1<<62); err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
		}
		l.OffsetForTimestamp(0)
		if _, err := l.AppendAssigning(mkBatch(plain(2, 3, 5)), 9, t0); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		l, err = Open(fsys, dir, cfg, t0)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		l.Close()
	})
}

// FuzzIndex feeds arbitrary bytes to the index decoders: no panic, and a
// decoded index re-encodes to the same bytes.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 70, 0, 0, 0, 5, 0, 0, 1, 0}, int64(1000))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1}, int64(10))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, size int64) {
		if size < 0 {
			size = -size
		}
		if offs, err := decodeOffsetIndex(data, size); err == nil {
			var b []byte
			for _, e := range offs {
				b = appendOffsetEntry(b, e)
			}
			if !bytes.Equal(b, data) {
				t.Fatal("offset index does not round-trip")
			}
			if int64(len(offs)) > size/minBatchSize+1 {
				t.Fatal("index larger than its log allows")
			}
		}
		if times, err := decodeTimeIndex(data, size); err == nil {
			var b []byte
			for _, e := range times {
				b = appendTimeEntry(b, e)
			}
			if !bytes.Equal(b, data) {
				t.Fatal("time index does not round-trip")
			}
		}
	})
}

// FuzzCheckpoint feeds arbitrary bytes to every checkpoint decoder the log
// reads at recovery: no panic, and decode(encode(decoded)) is stable.
func FuzzCheckpoint(f *testing.F) {
	f.Add([]byte("0\n42\n"))
	f.Add([]byte("0\n2\n1 0\n3 17\n"))
	f.Add(producer.NewState().Encode())
	f.Add([]byte("0\n"))
	withTxn := producer.NewState()
	withTxn.Update(7, 1, producer.Batch{FirstSeq: 0, LastSeq: 2, FirstOffset: 10, LastOffset: 12})
	withTxn.BeginTxn(7, 10)
	f.Add(withTxn.Encode())
	f.Add(encodeTxnIndex([]AbortedTxn{{ProducerID: 7, FirstOffset: 10, LastOffset: 20, LastStable: 21}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if off, err := decodeOffsetFile(data); err == nil {
			if !bytes.Equal(encodeOffsetFile(off), data) {
				t.Fatalf("offset file %q does not round-trip", data)
			}
		}
		if c, err := epoch.Decode(data); err == nil {
			c2, err := epoch.Decode(c.Encode())
			if err != nil || !reflect.DeepEqual(c.Entries(), c2.Entries()) {
				t.Fatalf("epoch checkpoint does not round-trip: %v", err)
			}
		}
		if s, err := producer.Decode(data); err == nil {
			s2, err := producer.Decode(s.Encode())
			if err != nil || s2.Len() != s.Len() || s2.OpenTxns() != s.OpenTxns() {
				t.Fatalf("producer snapshot does not round-trip: %v", err)
			}
		}
		es := decodeTxnIndex(data)
		if len(es) > len(data)/txnEntrySize {
			t.Fatalf("%d aborted-index entries from %d bytes", len(es), len(data))
		}
		if !reflect.DeepEqual(decodeTxnIndex(encodeTxnIndex(es)), es) {
			t.Fatal("aborted index does not round-trip")
		}
	})
}
