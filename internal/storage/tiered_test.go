package storage

import (
	"errors"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"

	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"

	"github.com/sluice-io/sluice/internal/vfs"
)

// TestDeleteLocalBelow: with remote storage, local segments go while the log
// start stays, reads below the local start answer ErrOffsetTiered, and a
// reopen keeps the log start below the first local segment.
func TestDeleteLocalBelow(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig()
	cfg.RemoteStorage = true
	l := mustOpen(t, fsys, cfg)
	appendN(t, l, 40, 2, 200, 1)
	segs := l.NumSegments()
	n, err := l.DeleteLocalBelow(41)
	if err != nil || n == 0 || l.NumSegments() != segs-n {
		t.Fatalf("deleted %d of %d: %v", n, segs, err)
	}
	local := l.LocalLogStartOffset()
	if l.LogStartOffset() != 0 || local == 0 || local > 41 {
		t.Fatalf("log start %d local start %d", l.LogStartOffset(), local)
	}
	if _, err := l.Read(0, 10, 1<<62); !errors.Is(err, ErrOffsetTiered) {
		t.Fatalf("read below the local start: %v", err)
	}
	if _, err := l.Read(local, 10, 1<<62); err != nil {
		t.Fatalf("read at the local start: %v", err)
	}
	l.Close()
	l = mustOpen(t, fsys, cfg)
	defer l.Close()
	if l.LogStartOffset() != 0 || l.LocalLogStartOffset() != local {
		t.Fatalf("after reopen: log start %d local start %d, want 0 and %d", l.LogStartOffset(), l.LocalLogStartOffset(), local)
	}
	cfg.RemoteStorage = false
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteLocalBelow(1000); err == nil {
		t.Fatal("DeleteLocalBelow without remote storage succeeded")
	}
}

// TestApplyLocalRetention: with remote storage, local retention deletes
// only segments copied to the remote log (at or below copiedEnd), never
// one that is not, and keeps the log start; segments below the log start
// go whatever was copied.
func TestApplyLocalRetention(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig()
	cfg.RemoteStorage = true
	cfg.LocalRetentionBytes = 0 // keep nothing that is copied
	l := mustOpen(t, fsys, cfg)
	defer l.Close()
	appendN(t, l, 40, 2, 200, 1)
	segs := l.LocalSegments()
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	// Nothing copied: nothing goes, however far past local retention.
	if n, err := l.ApplyLocalRetention(t0.Add(time.Hour), -1); err != nil || n != 0 {
		t.Fatalf("deleted %d uncopied segments: %v", n, err)
	}
	// Copied up to the end of the second segment: exactly two go.
	if n, err := l.ApplyLocalRetention(t0.Add(time.Hour), segs[1].Next-1); err != nil || n != 2 {
		t.Fatalf("deleted %d, want 2: %v", n, err)
	}
	if l.LogStartOffset() != 0 || l.LocalLogStartOffset() != segs[2].Base {
		t.Fatalf("log start %d local start %d", l.LogStartOffset(), l.LocalLogStartOffset())
	}
	// The copy of the next segment reads its bytes as the log holds them.
	c, err := l.SegmentCopy(segs[2].Base)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, c.LogSize)
	if _, err := c.Log.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	sl, err := l.Read(segs[2].Base, int(c.LogSize), segs[2].Next)
	if err != nil || sl.Size != c.LogSize {
		t.Fatalf("read %d bytes: %v", sl.Size, err)
	}
	if len(c.Index) == 0 || len(c.SegmentEpochs) != 1 || c.SegmentEpochs[0] != (epoch.Entry{Epoch: 1, StartOffset: segs[2].Base}) {
		t.Fatalf("copy index %d bytes, epochs %v", len(c.Index), c.SegmentEpochs)
	}
	if _, err := l.SegmentCopy(segs[len(segs)-1].Base); !errors.Is(err, ErrNoSuchSegment) {
		t.Fatalf("copy of the active segment: %v", err)
	}
	// A log start above local segments deletes them, copied or not.
	if err := l.AdvanceLogStart(segs[3].Next); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyLocalRetention(t0, -1); err != nil || l.LocalLogStartOffset() != segs[4].Base {
		t.Fatalf("below the log start: deleted %d, local start %d: %v", n, l.LocalLogStartOffset(), err)
	}
}

// TestSegmentCopyProducerState: the producer state uploaded with a
// segment is the state as of the segment's end, also when it has to be
// replayed from an earlier snapshot.
func TestSegmentCopyProducerState(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig()
	cfg.RemoteStorage = true
	l := mustOpen(t, fsys, cfg)
	defer l.Close()
	for i := 0; i < 40; i++ {
		b := mkBatch(spec{records: 2, valSize: 200, ts: t0.UnixMilli(), pid: 7, seq: int32(2 * i), fill: 'p'})
		fixCRC(b)
		appendLeader(t, l, b)
	}
	segs := l.LocalSegments()
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	for _, replay := range []bool{false, true} {
		s := segs[2]
		if replay {
			// Only the snapshot at the segment's base is left below its end.
			if err := fsys.Remove(fileName(l.Dir(), s.Next, snapshotSuffix)); err != nil {
				t.Fatal(err)
			}
		}
		c, err := l.SegmentCopy(s.Base)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := producer.Decode(c.ProducerSnapshot)
		if err != nil {
			t.Fatal(err)
		}
		e := ps.Get(7)
		if !c.SnapshotExact || e == nil || e.Batches[len(e.Batches)-1].LastOffset != s.Next-1 || e.Batches[len(e.Batches)-1].LastSeq != int32(s.Next-1) {
			t.Fatalf("replay %v: state at %d: exact %v, %+v", replay, s.Next, c.SnapshotExact, e)
		}
	}
}

// TestLocalRetentionKeepsProducerStateRecoverable: an owned log (the
// owner writes its snapshot a few batches after each roll) whose local
// retention deletes copied segments still recovers, after a crash, the
// aborted-index entry of a transaction that began in a deleted segment
// and was aborted in a local one: a read_committed read must not see its
// records.
func TestLocalRetentionKeepsProducerStateRecoverable(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	cfg.RemoteStorage = true
	cfg.LocalRetentionBytes = 0
	fsys := vfs.NewMem()
	l, err := Open(fsys, "/data/topic-0", cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	o := handOver(l)
	put := func(b []byte) int64 {
		off := o.l.LogEndOffset()
		batch.SetBaseOffset(b, off)
		batch.SetLeaderEpoch(b, 0)
		fixCRC(b)
		o.append(t, b)
		return off
	}
	fill := func(rolls int) {
		for want := o.l.NumSegments() + rolls; o.l.NumSegments() < want; {
			put(mkBatch(plain(2, 100, t0.UnixMilli())))
		}
		put(mkBatch(plain(2, 100, t0.UnixMilli()))) // past the owner's snapshot
	}
	fill(2)
	first := put(txnBatch(7, 0, 1))
	fill(2)
	marker := put(batch.EncodeMarker(7, 0, batch.Marker{CoordinatorEpoch: 1}, t0.UnixMilli()))
	// Every sealed segment is copied: local retention deletes what it may,
	// and the marker is in the active segment, whose aborted index is not
	// on disk yet.
	if err := o.l.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := o.l.LocalSegments()
	if _, err := o.l.ApplyLocalRetention(t0, segs[len(segs)-1].Base-1); err != nil {
		t.Fatal(err)
	}
	if o.l.LocalLogStartOffset() <= first {
		t.Fatalf("local start %d: the transaction's first batch (%d) was not deleted locally", o.l.LocalLogStartOffset(), first)
	}
	want := []AbortedTxn{{ProducerID: 7, FirstOffset: first, LastOffset: marker, LastStable: marker + 1}}
	if got := o.l.AbortedTxns(first, o.l.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("before the crash: aborted %+v, want %+v", got, want)
	}
	if err := o.l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := fsys.Crash(rand.New(rand.NewSource(1)))
	o.l.Close()
	l2, err := Open(crashed, "/data/topic-0", cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := l2.AbortedTxns(first, l2.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a crash (local start %d, marker %d): aborted %+v, want %+v", l2.LocalLogStartOffset(), marker, got, want)
	}
}
