package storage

import (
	"bytes"
	"encoding/binary"
	"flag"
	"hash/crc32"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/vfs"
)

// spec describes a test batch.
type spec struct {
	records int
	valSize int
	ts      int64 // base timestamp; record i has ts+i
	pid     int64 // -1 for none
	pepoch  int16
	seq     int32
	fill    byte
}

func plain(records, valSize int, ts int64) spec {
	return spec{records: records, valSize: valSize, ts: ts, pid: -1, seq: -1, fill: 'v'}
}

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// mkBatch encodes an uncompressed v2 batch with base offset 0 and epoch -1.
func mkBatch(s spec) []byte {
	var recs []byte
	val := bytes.Repeat([]byte{s.fill}, s.valSize)
	for i := 0; i < s.records; i++ {
		var r []byte
		r = append(r, 0)                     // attributes
		r = appendVarint(r, int64(i))        // timestamp delta
		r = appendVarint(r, int64(i))        // offset delta
		r = appendVarint(r, -1)              // null key
		r = appendVarint(r, int64(len(val))) // value
		r = append(r, val...)
		r = appendVarint(r, 0) // headers
		recs = appendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	b := make([]byte, batch.HeaderSize, batch.HeaderSize+len(recs))
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)
	be.PutUint32(b[8:], uint32(batch.HeaderSize-12+len(recs)))
	be.PutUint32(b[12:], ^uint32(0))
	b[16] = 2
	be.PutUint16(b[21:], 0)
	be.PutUint32(b[23:], uint32(s.records-1))
	be.PutUint64(b[27:], uint64(s.ts))
	be.PutUint64(b[35:], uint64(s.ts+int64(s.records)-1))
	be.PutUint64(b[43:], uint64(s.pid))
	be.PutUint16(b[51:], uint16(s.pepoch))
	be.PutUint32(b[53:], uint32(s.seq))
	be.PutUint32(b[57:], uint32(s.records))
	b = append(b, recs...)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func testConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 256
	c.FileDeleteDelayMs = 0
	c.RetentionMs = -1
	return c
}

var t0 = time.UnixMilli(1_700_000_000_000)

// handles is the descriptor limit of the vfs.HandleCache that mustOpen puts
// in front of a test's filesystem: tests run with segment files closed and
// reopened all the time, as a broker with many partitions does. 0 opens
// the filesystem directly.
var handles = flag.Int("storage.handles", 2, "open-file limit of the handle cache under mustOpen's logs (0: none)")

func mustOpen(t testing.TB, fsys vfs.FS, cfg Config) *Log {
	t.Helper()
	if *handles > 0 {
		fsys = vfs.WithHandleCache(fsys, *handles)
	}
	l, err := Open(fsys, "/data/topic-0", cfg, t0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// readAll reads the whole log from the log start and splits it into
// batches, failing on any invalid or non-contiguous batch.
func readAll(t testing.TB, l *Log) [][]byte {
	t.Helper()
	start, end := l.LogStartOffset(), l.LogEndOffset()
	var out [][]byte
	off := start
	for off < end {
		sl, err := l.Read(off, 1<<20, end)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if sl.Size == 0 {
			t.Fatalf("Read(%d) empty before end %d", off, end)
		}
		b, err := sl.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, one, rest, err := batch.Next(b)
			if err != nil {
				t.Fatalf("bad batch at %d: %v", off, err)
			}
			if err := batch.CheckCRC(one); err != nil {
				t.Fatalf("CRC at %d: %v", h.BaseOffset, err)
			}
			if len(out) == 0 && (h.BaseOffset > off || h.NextOffset() <= off) {
				t.Fatalf("first batch %d..%d does not hold %d", h.BaseOffset, h.LastOffset(), off)
			}
			if len(out) > 0 && h.BaseOffset != off {
				t.Fatalf("batch at %d, expected %d", h.BaseOffset, off)
			}
			out = append(out, one)
			off = h.NextOffset()
			b = rest
		}
	}
	return out
}
