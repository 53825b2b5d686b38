package storage

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

// appendN appends n plain batches of `records` records, returning copies
// of the stored bytes.
func appendN(t *testing.T, l *Log, n, records, valSize int, epoch int32) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 0; i < n; i++ {
		b := mkBatch(plain(records, valSize, t0.UnixMilli()+int64(i)))
		info, err := l.AppendAssigning(b, epoch, t0)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if info.LastOffset-info.FirstOffset != int64(records-1) {
			t.Fatalf("append %d: info %+v", i, info)
		}
		out = append(out, append([]byte(nil), b...))
	}
	return out
}

func equalBatches(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			h, _ := batch.ParseHeader(got[i])
			t.Fatalf("batch %d (offset %d) differs", i, h.BaseOffset)
		}
	}
}

func TestAppendReadRoll(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), testConfig())
	defer l.Close()
	want := appendN(t, l, 60, 3, 100, 1)
	if l.LogEndOffset() != 180 {
		t.Fatalf("LEO = %d", l.LogEndOffset())
	}
	if l.NumSegments() < 3 {
		t.Fatalf("expected rolls, have %d segments", l.NumSegments())
	}
	equalBatches(t, readAll(t, l), want)

	// Every offset reads back starting with the batch holding it.
	for off := int64(0); off < 180; off++ {
		sl, err := l.Read(off, 1, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := sl.AppendTo(nil)
		if !bytes.Equal(b, want[off/3]) {
			t.Fatalf("Read(%d, 1) returned the wrong first batch", off)
		}
		if sl.NextOffset != off/3*3+3 {
			t.Fatalf("NextOffset = %d", sl.NextOffset)
		}
	}
	// maxBytes: whole batches only, within the budget.
	size := int64(len(want[0]))
	sl, _ := l.Read(0, int(3*size+size/2), 1<<62)
	if sl.Size != 3*size {
		t.Fatalf("Size = %d, want %d", sl.Size, 3*size)
	}
	// maxOffset: batches starting below it only.
	sl, _ = l.Read(0, 1<<20, 7)
	if sl.NextOffset != 9 || sl.Size != 3*size {
		t.Fatalf("maxOffset cut: next %d size %d", sl.NextOffset, sl.Size)
	}
	// A read spanning segments.
	sl, _ = l.Read(30, 1<<20, 1<<62)
	b, _ := sl.AppendTo(nil)
	if len(sl.Chunks) < 2 || !bytes.HasPrefix(bytes.Join(want[10:], nil), b) || sl.NextOffset != 30+int64(len(b)/len(want[0]))*3 {
		t.Fatalf("cross-segment read: %d chunks, %d bytes, next %d", len(sl.Chunks), len(b), sl.NextOffset)
	}
	// Edges.
	if sl, err := l.Read(180, 100, 1<<62); err != nil || sl.Size != 0 {
		t.Fatalf("Read(LEO) = %+v, %v", sl, err)
	}
	if _, err := l.Read(181, 100, 1<<62); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(LEO+1) err = %v", err)
	}
	if sl, _ := l.Read(5, 100, 5); sl.Size != 0 {
		t.Fatal("Read at maxOffset not empty")
	}
}

func TestReopenClean(t *testing.T) {
	fsys := vfs.NewMem()
	l := mustOpen(t, fsys, testConfig())
	want := appendN(t, l, 20, 2, 300, 3)
	want = append(want, appendN(t, l, 5, 1, 10, 4)...)
	p := mkBatch(spec{records: 2, valSize: 5, ts: t0.UnixMilli(), pid: 7, pepoch: 1, seq: 0})
	if _, err := l.AppendAssigning(p, 4, t0); err != nil {
		t.Fatal(err)
	}
	want = append(want, append([]byte(nil), p...))
	epochs := l.EpochEntries()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAssigning(mkBatch(plain(1, 1, 0)), 4, t0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	l = mustOpen(t, fsys, testConfig())
	defer l.Close()
	equalBatches(t, readAll(t, l), want)
	if got := l.EpochEntries(); !reflect.DeepEqual(got, epochs) {
		t.Fatalf("epochs %v, want %v", got, epochs)
	}
	if e := l.ProducerEntry(7); e == nil || e.Batches[0].LastSeq != 1 {
		t.Fatalf("producer state lost: %+v", e)
	}
	if l.FlushedOffset() != l.LogEndOffset() {
		t.Fatal("reopened log not flushed")
	}
	appendN(t, l, 3, 1, 10, 5)
}

func TestIdempotence(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), testConfig())
	defer l.Close()
	prod := func(seq int32, pepoch int16) []byte {
		return mkBatch(spec{records: 3, valSize: 10, ts: t0.UnixMilli(), pid: 42, pepoch: pepoch, seq: seq})
	}
	appendN(t, l, 1, 1, 1, 0)
	a, err := l.AppendAssigning(prod(0, 0), 0, t0)
	if err != nil || a.FirstOffset != 1 || a.LastOffset != 3 {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := l.AppendAssigning(prod(3, 0), 0, t0); err != nil {
		t.Fatal(err)
	}
	d, err := l.AppendAssigning(prod(0, 0), 0, t0)
	if err != nil || !d.Duplicate || d.FirstOffset != 1 || d.LastOffset != 3 {
		t.Fatalf("duplicate: %+v %v", d, err)
	}
	if l.LogEndOffset() != 7 {
		t.Fatalf("duplicate was written: LEO %d", l.LogEndOffset())
	}
	if _, err := l.AppendAssigning(prod(9, 0), 0, t0); !errors.Is(err, producer.ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	if _, err := l.AppendAssigning(prod(0, 1), 0, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAssigning(prod(6, 0), 0, t0); !errors.Is(err, producer.ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
}

func TestTruncateTo(t *testing.T) {
	fsys := vfs.NewMem()
	l := mustOpen(t, fsys, testConfig())
	want := appendN(t, l, 20, 3, 200, 1) // offsets 0..59
	want = append(want, appendN(t, l, 20, 3, 200, 2)...)
	p := mkBatch(spec{records: 1, valSize: 5, ts: t0.UnixMilli(), pid: 9, pepoch: 0, seq: 0})
	l.AppendAssigning(p, 2, t0) // offset 120
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := l.NumSegments()
	// Truncating inside a batch drops the whole batch.
	if err := l.TruncateTo(47); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 45 || l.FlushedOffset() != 45 {
		t.Fatalf("LEO %d flushed %d, want 45", l.LogEndOffset(), l.FlushedOffset())
	}
	if l.NumSegments() >= segs {
		t.Fatal("later segments not removed")
	}
	equalBatches(t, readAll(t, l), want[:15])
	if got := l.EpochEntries(); !reflect.DeepEqual(got, []epoch.Entry{{Epoch: 1, StartOffset: 0}}) {
		t.Fatalf("epochs %v", got)
	}
	// The producer's batch was truncated: a retry is appended, not a dup.
	if e := l.ProducerEntry(9); e != nil {
		t.Fatalf("producer state not rolled back: %+v", e)
	}
	info, err := l.AppendAssigning(mkBatch(spec{records: 1, valSize: 5, ts: t0.UnixMilli(), pid: 9, seq: 0}), 3, t0)
	if err != nil || info.Duplicate || info.FirstOffset != 45 {
		t.Fatalf("retry after truncation: %+v %v", info, err)
	}
	// No-op truncation still truncates the epoch cache.
	if err := l.AssignEpoch(4, 46); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(46); err != nil {
		t.Fatal(err)
	}
	if l.LatestEpoch() != 3 {
		t.Fatalf("latest epoch %d, want 3", l.LatestEpoch())
	}
	appendN(t, l, 30, 2, 100, 5)
	l.Close()
	l = mustOpen(t, fsys, testConfig())
	defer l.Close()
	if l.LogEndOffset() != 106 {
		t.Fatalf("LEO after reopen %d", l.LogEndOffset())
	}
	readAll(t, l)
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	fsys := vfs.NewMem()
	l := mustOpen(t, fsys, testConfig())
	appendN(t, l, 30, 2, 200, 1)
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.NumSegments() != 1 || len(l.EpochEntries()) != 0 {
		t.Fatalf("start %d end %d segs %d epochs %v", l.LogStartOffset(), l.LogEndOffset(), l.NumSegments(), l.EpochEntries())
	}
	want := appendN(t, l, 3, 1, 10, 2)
	l.Close()
	l = mustOpen(t, fsys, testConfig())
	defer l.Close()
	if l.LogStartOffset() != 1000 {
		t.Fatalf("log start %d after reopen", l.LogStartOffset())
	}
	equalBatches(t, readAll(t, l), want)
}

func TestAdvanceLogStart(t *testing.T) {
	fsys := vfs.NewMem()
	l := mustOpen(t, fsys, testConfig())
	want := appendN(t, l, 40, 2, 200, 1)
	segs := l.NumSegments()
	if err := l.AdvanceLogStart(41); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 41 || l.NumSegments() >= segs {
		t.Fatalf("start %d segments %d (was %d)", l.LogStartOffset(), l.NumSegments(), segs)
	}
	if _, err := l.Read(40, 10, 1<<62); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	got := readAll(t, l)
	equalBatches(t, got, want[20:])
	if err := l.AdvanceLogStart(1000); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond LEO: %v", err)
	}
	if e := l.EpochEntries(); len(e) != 1 || e[0].StartOffset != 41 {
		t.Fatalf("epochs %v", e)
	}
	l.Close()
	l = mustOpen(t, fsys, testConfig())
	if l.LogStartOffset() != 41 {
		t.Fatalf("log start %d after reopen", l.LogStartOffset())
	}
	// Up to the log end: everything goes, the log stays appendable.
	if err := l.AdvanceLogStart(80); err != nil {
		t.Fatal(err)
	}
	if l.Size() != 0 || l.LogStartOffset() != 80 {
		t.Fatalf("size %d start %d", l.Size(), l.LogStartOffset())
	}
	appendN(t, l, 2, 1, 1, 1)
	l.Close()
}

func TestRetention(t *testing.T) {
	cfg := testConfig()
	l := mustOpen(t, vfs.NewMem(), cfg)
	defer l.Close()
	// 10 segments' worth, timestamps one hour apart per batch.
	for i := 0; i < 40; i++ {
		ts := t0.UnixMilli() + int64(i)*3600_000
		if _, err := l.AppendAssigning(mkBatch(plain(1, 900, ts)), 0, t0); err != nil {
			t.Fatal(err)
		}
	}
	n0 := l.NumSegments()
	now := t0.Add(40 * time.Hour)
	// Nothing goes without a limit.
	if n, _ := l.ApplyRetention(now, l.LogEndOffset()); n != 0 {
		t.Fatalf("deleted %d with no limits", n)
	}
	cfg.RetentionMs = int64(20 * time.Hour / time.Millisecond)
	l.SetConfig(cfg)
	// The high watermark bounds deletion.
	if n, _ := l.ApplyRetention(now, 0); n != 0 {
		t.Fatalf("deleted %d segments above the HW", n)
	}
	n, err := l.ApplyRetention(now, l.LogEndOffset())
	if err != nil || n == 0 {
		t.Fatalf("time retention deleted %d: %v", n, err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatal("log start not raised")
	}
	readAll(t, l)
	// Every remaining sealed segment's newest timestamp is recent enough.
	off, _, ok, _ := l.OffsetForTimestamp(0)
	if !ok || off != l.LogStartOffset() {
		t.Fatalf("first offset by time %d, start %d", off, l.LogStartOffset())
	}
	cfg.RetentionBytes = 2 * 4096
	l.SetConfig(cfg)
	if _, err := l.ApplyRetention(now, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	// Kafka's rule: a segment goes only if the rest still holds
	// retention.bytes, so up to one segment more may remain.
	if l.Size() > 3*4096 || l.NumSegments() >= n0 {
		t.Fatalf("size retention left %d bytes in %d segments", l.Size(), l.NumSegments())
	}
	// Everything expired: an empty active segment remains.
	if _, err := l.ApplyRetention(now.Add(1000*time.Hour), l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 1 || l.Size() != 0 || l.LogStartOffset() != l.LogEndOffset() {
		t.Fatalf("segments %d size %d start %d end %d", l.NumSegments(), l.Size(), l.LogStartOffset(), l.LogEndOffset())
	}
	appendN(t, l, 1, 1, 1, 0)
}

func TestOffsetForTimestamp(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), testConfig())
	defer l.Close()
	// Batch i has 4 records with timestamps 1000*i + 0..3.
	for i := 0; i < 50; i++ {
		if _, err := l.AppendAssigning(mkBatch(plain(4, 100, int64(1000*i))), 0, t0); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ ts, off, got int64 }{
		{0, 0, 0}, {2, 2, 2}, {3, 3, 3}, {4, 4, 1000}, {999, 4, 1000},
		{1000, 4, 1000}, {25001, 101, 25001}, {49003, 199, 49003},
	} {
		off, ts, ok, err := l.OffsetForTimestamp(c.ts)
		if err != nil || !ok || off != c.off || ts != c.got {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d", c.ts, off, ts, ok, err, c.off, c.got)
		}
	}
	if _, _, ok, _ := l.OffsetForTimestamp(49004); ok {
		t.Error("found a record after the newest timestamp")
	}
}

func TestFollowerAppendAndEpochs(t *testing.T) {
	leader := mustOpen(t, vfs.NewMem(), testConfig())
	defer leader.Close()
	appendN(t, leader, 5, 2, 50, 1)
	appendN(t, leader, 5, 2, 50, 3)
	sl, _ := leader.Read(0, 1<<20, 1<<62)
	data, _ := sl.AppendTo(nil)

	f := mustOpen(t, vfs.NewMem(), testConfig())
	defer f.Close()
	if err := f.Append(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Append(data[len(data)/2:]); err == nil {
		t.Fatal("follower accepted an append below its log end")
	}
	if f.LogEndOffset() != 20 {
		t.Fatalf("follower LEO %d", f.LogEndOffset())
	}
	want := []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 10}}
	if got := f.EpochEntries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("epochs %v", got)
	}
	for _, c := range []struct {
		req, ep int32
		end     int64
	}{{1, 1, 10}, {2, 1, 10}, {3, 3, 20}, {0, 0, 0}, {4, -1, -1}} {
		if ep, end := f.EndOffsetForEpoch(c.req); ep != c.ep || end != c.end {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d", c.req, ep, end)
		}
	}
	equalBatches(t, readAll(t, f), readAll(t, leader))
}

func TestIndexRebuild(t *testing.T) {
	fsys := vfs.NewMem()
	l := mustOpen(t, fsys, testConfig())
	want := appendN(t, l, 40, 3, 120, 1)
	l.Close()
	dir := "/data/topic-0"
	names, _ := fsys.List(dir)
	n := 0
	for _, name := range names {
		p := filepath.Join(dir, name)
		switch filepath.Ext(name) {
		case ".index":
			if n%2 == 0 {
				fsys.Remove(p)
			} else {
				vfs.WriteFileAtomic(fsys, p, []byte("garbage!"), false)
			}
			n++
		case ".timeindex":
			vfs.WriteFileAtomic(fsys, p, bytes.Repeat([]byte{0xff}, 12), false)
		}
	}
	l = mustOpen(t, fsys, testConfig())
	defer l.Close()
	equalBatches(t, readAll(t, l), want)
	for off := int64(0); off < 120; off += 7 {
		sl, _ := l.Read(off, 1, 1<<62)
		b, _ := sl.AppendTo(nil)
		if !bytes.Equal(b, want[off/3]) {
			t.Fatalf("Read(%d) after rebuild", off)
		}
	}
	if off, _, ok, _ := l.OffsetForTimestamp(t0.UnixMilli() + 30); !ok || off != 86 {
		t.Fatalf("time lookup after rebuild: %d %v", off, ok)
	}
}

func TestGroupCommit(t *testing.T) {
	var syncs atomic.Int64
	counter := vfs.InjectorFunc(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && filepath.Ext(name) == ".log" {
			syncs.Add(1)
			time.Sleep(time.Millisecond) // a disk whose fsync takes 1ms
		}
		return nil
	})
	fsys := vfs.WithFaults(vfs.NewMem(), counter)
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, fsys, cfg)
	defer l.Close()
	const writers, each = 8, 50
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func() {
			for i := 0; i < each; i++ {
				info, err := l.AppendAssigning(mkBatch(plain(1, 100, 0)), 0, t0)
				if err == nil {
					err = l.SyncTo(info.LastOffset + 1)
				}
				if err == nil && l.FlushedOffset() <= info.LastOffset {
					err = fmt.Errorf("SyncTo returned before %d was flushed", info.LastOffset)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	n := syncs.Load()
	t.Logf("%d SyncTo calls, %d fsyncs", writers*each, n)
	if n > writers*each/2 {
		t.Fatalf("group commit not sharing fsyncs: %d fsyncs for %d SyncTo calls", n, writers*each)
	}
}

func TestSyncFailureIsSticky(t *testing.T) {
	rule := &vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, PathContains: ".log"}
	rule.Disable()
	fsys := vfs.WithFaults(vfs.NewMem(), rule)
	l := mustOpen(t, fsys, testConfig())
	appendN(t, l, 3, 1, 10, 0)
	rule.Enable()
	if err := l.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync = %v, want ErrFailed", err)
	}
	rule.Disable()
	if err := l.SyncTo(l.LogEndOffset()); !errors.Is(err, ErrFailed) {
		t.Fatalf("SyncTo after failure = %v", err)
	}
	if _, err := l.AppendAssigning(mkBatch(plain(1, 1, 0)), 0, t0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure = %v", err)
	}
	l.Close()
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.SegmentBytes = 1 << 40
	if c.Validate() == nil {
		t.Fatal("segment.bytes beyond 2 GiB accepted")
	}
	if _, err := Open(vfs.NewMem(), "/x", c, t0); err == nil {
		t.Fatal("Open accepted an invalid config")
	}
}

func TestBatchTooLarge(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), testConfig())
	defer l.Close()
	if _, err := l.AppendAssigning(mkBatch(plain(1, 5000, 0)), 0, t0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

// TestRetentionCompactOnly is the regression test for compacted topics
// deleted by time and size retention: Kafka applies retention.ms and
// retention.bytes only when cleanup.policy contains delete, so a
// compact-only log keeps every segment however old or large it is; the log
// start (DeleteRecords) still deletes.
func TestRetentionCompactOnly(t *testing.T) {
	cfg := testConfig()
	cfg.Delete, cfg.Compact = false, true
	cfg.RetentionMs = 1000
	cfg.RetentionBytes = 0
	l := mustOpen(t, vfs.NewMem(), cfg)
	defer l.Close()
	for i := 0; i < 40; i++ {
		if _, err := l.AppendAssigning(mkBatch(plain(1, 900, t0.UnixMilli())), 0, t0); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.NumSegments()
	if segs < 5 {
		t.Fatalf("only %d segments rolled", segs)
	}
	n, err := l.ApplyRetention(t0.Add(1000*time.Hour), l.LogEndOffset())
	if err != nil || n != 0 || l.NumSegments() != segs || l.LogStartOffset() != 0 {
		t.Fatalf("compact-only retention deleted %d segments (%d of %d left, start %d): %v", n, l.NumSegments(), segs, l.LogStartOffset(), err)
	}
	if got := len(readAll(t, l)); got != 40 {
		t.Fatalf("read %d batches, want 40", got)
	}
	// compact,delete: both apply.
	cfg.Delete = true
	l.SetConfig(cfg)
	if n, err := l.ApplyRetention(t0.Add(1000*time.Hour), l.LogEndOffset()); err != nil || n == 0 {
		t.Fatalf("compact,delete retention deleted %d: %v", n, err)
	}
}
