package remote_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/remote/remotetest"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type epochEntry = epoch.Entry

var part = remote.Partition{TopicID: [16]byte{1, 2, 3}, Topic: "t", Partition: 0}

// tiered is a log whose older segments were copied to a remote store.
type tiered struct {
	fsys  vfs.FS
	log   *storage.Log
	store *objstore.Memory
	meta  *remote.MemMetadata
	segs  []remote.Segment
}

// build writes n batches with make(i) into a log of small segments.
func build(t *testing.T, n int, mk func(i int) []byte) *tiered {
	t.Helper()
	fsys := vfs.NewMem()
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 150
	cfg.RemoteStorage = true
	l, err := storage.Open(fsys, "/p", cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := 0; i < n; i++ {
		ep := int32(1 + i/40) // a few leader epochs
		if _, err := l.AppendAssigning(mk(i), ep, t0); err != nil {
			t.Fatal(err)
		}
	}
	return &tiered{fsys: fsys, log: l, store: &objstore.Memory{}, meta: &remote.MemMetadata{}}
}

// tier uploads the segments below offset and deletes them locally.
func (tl *tiered) tier(t *testing.T, offset int64) {
	t.Helper()
	segs, err := remotetest.Upload(context.Background(), tl.fsys, tl.log, tl.store, tl.meta, "", part, offset)
	if err != nil || len(segs) == 0 {
		t.Fatalf("upload: %d segments, %v", len(segs), err)
	}
	tl.segs = append(tl.segs, segs...)
	if _, err := tl.log.DeleteLocalBelow(offset); err != nil {
		t.Fatal(err)
	}
}

func plainBatch(i int) []byte {
	vals := make([]string, 1+i%4)
	for k := range vals {
		vals[k] = fmt.Sprintf("value-%d-%d-%s", i, k, bytes.Repeat([]byte{'x'}, i%50))
	}
	return batchtest.Build(batchtest.Options{BaseTimestamp: t0.UnixMilli() + int64(i)*10}, batchtest.Values(vals...))
}

func localRead(t *testing.T, l *storage.Log, offset int64, maxBytes int, maxOffset int64) ([]byte, int64) {
	t.Helper()
	sl, err := l.Read(offset, maxBytes, maxOffset)
	if err != nil {
		t.Fatalf("local read %d: %v", offset, err)
	}
	b, err := sl.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, sl.NextOffset
}

// TestReadMatchesLocal: for every offset of the remote range and several
// byte limits, a remote read gives the bytes a local read of the same
// segment gave before the segment left the local disk (boundaries of
// batches and segments, the first batch whole under KIP-74, nothing for
// an oversized first batch without first).
func TestReadMatchesLocal(t *testing.T) {
	tl := build(t, 200, plainBatch)
	type key struct {
		off   int64
		max   int
		first bool
	}
	type ans struct {
		data []byte
		next int64
	}
	hw := tl.log.LogEndOffset()
	cut := hw / 2
	want := map[key]ans{}
	limits := []int{0, 1, 100, 500, 5000}
	for off := int64(0); off < cut+20; off++ {
		for _, m := range limits {
			// Local reads stop at the segment's end to compare with a
			// remote read, which reads one segment.
			d, n := localRead(t, tl.log, off, m, hw)
			want[key{off, m, true}] = ans{d, n}
		}
	}
	tl.tier(t, cut)
	local := tl.log.LocalLogStartOffset()
	if local == 0 || local > cut {
		t.Fatalf("local start %d", local)
	}
	t.Logf("%d remote segments, local start %d, log end %d", len(tl.segs), local, hw)
	rd := remote.NewReader(tl.store, tl.meta, remote.ReaderConfig{ChunkBytes: 300, ChunkCacheBytes: 2000, IndexCacheBytes: 1 << 20})
	ctx := context.Background()
	lineage := tl.log.EpochEntries()
	for off := int64(0); off < local; off++ {
		seg, ok := rd.FindSegment(part, lineage, off)
		if !ok {
			t.Fatalf("no segment for %d", off)
		}
		for _, m := range limits {
			for _, first := range []bool{true, false} {
				got, err := rd.Read(ctx, part, lineage, off, m, hw, first)
				if err != nil {
					t.Fatalf("read %d/%d: %v", off, m, err)
				}
				// The local answer within the segment.
				w := want[key{off, m, true}]
				wd, wn := cutTo(t, w.data, seg.EndOffset+1)
				if !first && len(wd) > m {
					wd, wn = nil, off
				}
				if len(wd) == 0 {
					wn = off
				}
				if !bytes.Equal(got.Records, wd) || got.NextOffset != wn {
					t.Fatalf("offset %d max %d first %v: got %d bytes next %d, want %d bytes next %d",
						off, m, first, len(got.Records), got.NextOffset, len(wd), wn)
				}
			}
		}
	}
	// The HW bound: nothing at or past maxOffset.
	got, err := rd.Read(ctx, part, lineage, 0, 1<<20, 1, true)
	if err != nil || got.NextOffset > batchEnd(t, got.Records) || len(got.Records) == 0 {
		t.Fatalf("bounded read: %v %+v", err, got.NextOffset)
	}
	if _, err := rd.Read(ctx, part, lineage, hw+10, 100, hw+20, true); !errors.Is(err, remote.ErrNoSegment) {
		t.Fatalf("read past the remote log: %v", err)
	}
	if n, b, cn, cb := rd.CacheStats(); n == 0 || b == 0 || cn == 0 || cb > 2000 {
		t.Fatalf("cache stats: index %d/%d chunks %d/%d", n, b, cn, cb)
	}
}

// cutTo keeps the whole batches of data whose base offset is below end.
func cutTo(t *testing.T, data []byte, end int64) ([]byte, int64) {
	t.Helper()
	var n int
	next := int64(-1)
	for rest := data; len(rest) > 0; {
		h, b, r, err := batch.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset >= end {
			break
		}
		n += len(b)
		next = h.NextOffset()
		rest = r
	}
	return data[:n], next
}

func batchEnd(t *testing.T, data []byte) int64 {
	_, n := cutTo(t, data, 1<<62)
	return n
}

// TestReadMissingObject: a log object deleted behind the reader's back is
// ErrStorage (objstore.ErrNotFound inside), not a panic or a wrong answer.
func TestReadMissingObject(t *testing.T) {
	tl := build(t, 100, plainBatch)
	tl.tier(t, tl.log.LogEndOffset()/2)
	rd := remote.NewReader(tl.store, tl.meta, remote.ReaderConfig{})
	s := tl.segs[0]
	if err := tl.store.Delete(context.Background(), remote.ObjectKey("", &s, remote.FileLog)); err != nil {
		t.Fatal(err)
	}
	_, err := rd.Read(context.Background(), part, tl.log.EpochEntries(), s.StartOffset, 1000, 1<<62, true)
	if !errors.Is(err, remote.ErrStorage) || !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("read of a missing object: %v", err)
	}
	// The next segment still reads.
	if _, err := rd.Read(context.Background(), part, tl.log.EpochEntries(), tl.segs[1].StartOffset, 1000, 1<<62, true); err != nil {
		t.Fatal(err)
	}
}

// TestChunkCacheBound: the chunk cache never holds more than its bound,
// however much is read.
func TestChunkCacheBound(t *testing.T) {
	tl := build(t, 200, plainBatch)
	tl.tier(t, tl.log.LogEndOffset()-10)
	rd := remote.NewReader(tl.store, tl.meta, remote.ReaderConfig{ChunkBytes: 256, ChunkCacheBytes: 1024, IndexCacheBytes: 200})
	lineage := tl.log.EpochEntries()
	for off := int64(0); off < tl.log.LocalLogStartOffset(); off++ {
		if _, err := rd.Read(context.Background(), part, lineage, off, 3000, 1<<62, true); err != nil {
			t.Fatal(err)
		}
		in, ib, cn, cb := rd.CacheStats()
		if cb > 1024 || cn > 4 || ib > 200 || in < 0 {
			t.Fatalf("caches over their bound: index %d/%d chunks %d/%d", in, ib, cn, cb)
		}
	}
}

// TestFindSegmentLineage: of two segments over the same offsets (a new
// leader re-uploaded a range), the one of the lineage's epoch is read.
func TestFindSegmentLineage(t *testing.T) {
	meta := &remote.MemMetadata{}
	a := remote.Segment{Partition: part, ID: [16]byte{1}, StartOffset: 0, EndOffset: 99, State: remote.CopyFinished,
		LeaderEpochs: []epochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 50}}}
	b := remote.Segment{Partition: part, ID: [16]byte{2}, StartOffset: 0, EndOffset: 120, State: remote.CopyFinished,
		LeaderEpochs: []epochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 40}}}
	meta.Add(a)
	meta.Add(b)
	rd := remote.NewReader(&objstore.Memory{}, meta, remote.ReaderConfig{})
	for _, c := range []struct {
		lineage []epochEntry
		off     int64
		want    byte
		ok      bool
	}{
		{[]epochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 50}}, 60, 1, true},
		{[]epochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 40}}, 60, 2, true},
		{[]epochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 40}}, 110, 2, true},
		{[]epochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 50}}, 110, 0, false}, // only an epoch-3 segment
		{nil, 10, 2, true},
	} {
		s, ok := rd.FindSegment(part, c.lineage, c.off)
		if ok != c.ok || (ok && s.ID[0] != c.want) {
			t.Fatalf("lineage %v offset %d: segment %d %v, want %d %v", c.lineage, c.off, s.ID[0], ok, c.want, c.ok)
		}
	}
	if hi := rd.HighestOffset(part); hi != 120 {
		t.Fatalf("highest offset %d", hi)
	}
	if !reflect.DeepEqual(meta.Segments(remote.Partition{}), []remote.Segment(nil)) {
		t.Fatal("another partition has segments")
	}
}

// txnLog writes transactions of four producers, interleaved with plain
// batches, every third one aborted, some spanning segment boundaries.
func txnLog(t *testing.T, n int) *tiered {
	seq := map[int64]int32{}
	open := map[int64]int{}
	k := 0
	return build(t, n, func(i int) []byte {
		pid := int64(100 + i%4)
		ts := t0.UnixMilli() + int64(i)
		switch {
		case i%5 == 4:
			return plainBatch(i)
		case open[pid] >= 3:
			open[pid] = 0
			k++
			return batch.EncodeMarker(pid, 0, batch.Marker{Commit: k%3 != 0}, ts)
		default:
			open[pid]++
			b := batchtest.Build(batchtest.Options{BaseTimestamp: ts, ProducerID: pid, Transactional: true, BaseSequence: seq[pid]},
				batchtest.Values(fmt.Sprintf("txn-%d", i), "second"))
			seq[pid] += 2
			return b
		}
	})
}

// TestAbortedTxnsAcrossTiers: the aborted transactions of a read_committed
// read starting in the remote log are those a local read gave before the
// segments left the disk: the remote transaction indexes, then the local
// ones where the remote search did not reach the read's end.
func TestAbortedTxnsAcrossTiers(t *testing.T) {
	tl := txnLog(t, 300)
	leo := tl.log.LogEndOffset()
	cut := leo / 2
	type key struct{ from, upto int64 }
	want := map[key][]storage.AbortedTxn{}
	for from := int64(0); from < cut; from += 3 {
		for _, d := range []int64{1, 10, 50, 200, 1000} {
			upto := min(from+d, leo)
			want[key{from, upto}] = tl.log.AbortedTxns(from, upto)
		}
	}
	tl.tier(t, cut)
	local := tl.log.LocalLogStartOffset()
	rd := remote.NewReader(tl.store, tl.meta, remote.ReaderConfig{})
	lineage := tl.log.EpochEntries()
	aborts := 0
	for k, w := range want {
		if k.from >= local {
			continue
		}
		got, complete, err := rd.AbortedTxns(context.Background(), part, lineage, k.from, k.upto, local)
		if err != nil {
			t.Fatal(err)
		}
		if !complete {
			got = append(got, tl.log.AbortedTxns(k.from, k.upto)...)
		}
		if len(got) == 0 && len(w) == 0 {
			continue
		}
		aborts += len(got)
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("[%d, %d): got %+v, want %+v", k.from, k.upto, got, w)
		}
	}
	if aborts == 0 {
		t.Fatal("no aborted transaction in the remote range")
	}
	// A transaction index object missing is an error, not an answer
	// without the aborts.
	for _, s := range tl.segs {
		if !s.TxnIndexEmpty {
			tl.store.Delete(context.Background(), remote.ObjectKey("", &s, remote.FileTxnIndex))
			rd := remote.NewReader(tl.store, tl.meta, remote.ReaderConfig{})
			if _, _, err := rd.AbortedTxns(context.Background(), part, lineage, s.StartOffset, s.EndOffset+1, local); !errors.Is(err, remote.ErrStorage) {
				t.Fatalf("missing txnindex: %v", err)
			}
			return
		}
	}
	t.Fatal("no remote segment has a transaction index")
}

// TestOffsetForTimestampAcrossTiers: a timestamp lookup finds the offset a
// local lookup found before tiering, in the remote log or after it.
func TestOffsetForTimestampAcrossTiers(t *testing.T) {
	tl := build(t, 200, plainBatch)
	type ans struct {
		off, ts int64
		ok      bool
	}
	want := map[int64]ans{}
	for ts := t0.UnixMilli() - 5; ts < t0.UnixMilli()+2100; ts += 7 {
		o, tt, ok, err := tl.log.OffsetForTimestamp(ts)
		if err != nil {
			t.Fatal(err)
		}
		want[ts] = ans{o, tt, ok}
	}
	tl.tier(t, tl.log.LogEndOffset()/2)
	rd := remote.NewReader(tl.store, tl.meta, remote.ReaderConfig{})
	remoteHits := 0
	for ts, w := range want {
		o, tt, ok, err := rd.OffsetForTimestamp(context.Background(), part, tl.log.EpochEntries(), ts, tl.log.LogStartOffset())
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			remoteHits++
		} else {
			o, tt, ok, err = tl.log.OffsetForTimestamp(ts)
			if err != nil {
				t.Fatal(err)
			}
		}
		if (ans{o, tt, ok}) != w {
			t.Fatalf("timestamp %d: got %d@%d %v, want %+v", ts, o, tt, ok, w)
		}
	}
	if remoteHits == 0 {
		t.Fatal("no lookup answered from the remote log")
	}
}
