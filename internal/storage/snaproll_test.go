package storage

import (
	"bytes"
	"math/rand"
	"sync"
	"testing"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

// stateBelow replays the batches of l below off from the log start into a
// fresh producer state: what a snapshot named off must hold.
func stateBelow(t *testing.T, l *Log, off int64) *producer.State {
	t.Helper()
	ps := producer.NewState()
	for _, b := range readAll(t, l) {
		h, _ := batch.ParseHeader(b)
		if h.BaseOffset >= off {
			break
		}
		applyProducer(ps, &h, b)
	}
	return ps
}

// readSnapshot decodes the snapshot file named off, failing if it is
// missing or corrupt.
func readSnapshot(t *testing.T, fsys vfs.FS, dir string, off int64) *producer.State {
	t.Helper()
	b, err := vfs.ReadFile(fsys, fileName(dir, off, snapshotSuffix), maxSnapshotFileBytes)
	if err != nil {
		t.Fatalf("snapshot at %d: %v", off, err)
	}
	ps, err := producer.Decode(b)
	if err != nil {
		t.Fatalf("snapshot at %d: %v", off, err)
	}
	return ps
}

// readFS records the size of every read of the files opened through it,
// by name.
type readFS struct {
	vfs.FS
	mu    sync.Mutex
	reads map[string][]int
}

type readFile struct {
	vfs.File
	fs   *readFS
	name string
}

func (f *readFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &readFile{File: file, fs: f, name: name}, nil
}

func (f *readFS) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	return f.wrap(name, file, err)
}

func (f *readFS) OpenReadWrite(name string) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name)
	return f.wrap(name, file, err)
}

func (f *readFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	f.fs.reads[f.name] = append(f.fs.reads[f.name], len(p))
	f.fs.mu.Unlock()
	return f.File.ReadAt(p, off)
}

// TestSnapshotAtRoll: a segment roll of an owned log (the broker's mode)
// writes the producer snapshot named after the new segment's base, with
// the state after exactly the batches below it (Kafka's UnifiedLog.roll),
// even when the owner appends several batches past the roll in one call;
// retention keeps the new first segment's snapshot; and after a crash,
// recovery restores the producer state of a replay of the whole log
// while reading no sealed segment's data: it starts from the active
// segment's snapshot.
func TestSnapshotAtRoll(t *testing.T) {
	const dir = "/data/topic-0"
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	mem := vfs.NewMem()
	l, err := Open(mem, dir, cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	o := handOver(l)
	// One leader epoch for all batches (an owner persists it before its
	// first batch).
	o.epochs.Assign(0, 0)
	if err := o.l.SetEpochs(o.epochs.Entries()); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	seqs := map[int64]int32{}
	open := map[int64]bool{}
	rolls := 0
	atBase := map[int64][]byte{} // the state at each segment's base
	for i := 0; rolls < 8; i++ {
		// Several batches in one Append, as a follower's fetch or a
		// Ready's appends arrive: the owner's state is past the roll
		// point by the time the log rolls.
		var buf []byte
		var aborted []AbortedTxn
		off := o.l.LogEndOffset()
		for k := 0; k < 3; k++ {
			pid := int64(1 + rng.Intn(4))
			var b []byte
			switch r := rng.Intn(10); {
			case r < 5:
				n := 1 + rng.Intn(3)
				b = mkBatch(spec{records: n, valSize: 40, ts: t0.UnixMilli(), pid: pid + 10, seq: seqs[pid+10], fill: 'i'})
				seqs[pid+10] += int32(n)
			case r < 8 || !open[pid]:
				n := 1 + rng.Intn(3)
				b = txnBatch(pid, seqs[pid], n)
				seqs[pid] += int32(n)
				open[pid] = true
			default:
				b = batch.EncodeMarker(pid, 0, batch.Marker{Commit: rng.Intn(2) == 0, CoordinatorEpoch: 1}, t0.UnixMilli())
				open[pid] = false
			}
			h, _ := batch.ParseHeader(b)
			batch.SetBaseOffset(b, off)
			batch.SetLeaderEpoch(b, 0)
			fixCRC(b)
			h.BaseOffset = off
			if a, ok := applyProducer(o.ps, &h, b); ok {
				aborted = append(aborted, a)
			}
			off = h.NextOffset()
			buf = append(buf, b...)
		}
		before := len(o.l.segs)
		if err := o.l.Append(buf, aborted...); err != nil {
			t.Fatal(err)
		}
		if len(o.l.segs) == before {
			continue
		}
		rolls++
		base := o.l.active().base
		atBase[base] = stateBelow(t, o.l, base).Encode()
		if got := readSnapshot(t, mem, dir, base).Encode(); !bytes.Equal(got, atBase[base]) {
			t.Fatalf("roll %d: the snapshot at the new base %d differs from the state after the batches below it", rolls, base)
		}
	}

	if ref, _, _ := reference(t, o.l); !bytes.Equal(o.ps.Encode(), ref.Encode()) {
		t.Fatal("the owner's producer state differs from a replay of the log")
	}

	// Retention: drop all but the last three segments.
	var keep int64
	for _, s := range o.l.segs[len(o.l.segs)-3:] {
		keep += s.size
	}
	cfg.RetentionBytes = keep
	if err := o.l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if n, err := o.l.ApplyRetention(t0, o.l.LogEndOffset()); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments, err %v", n, err)
	}
	first := o.l.segs[0].base
	if got := readSnapshot(t, mem, dir, first).Encode(); !bytes.Equal(got, atBase[first]) {
		t.Fatalf("after retention, the first segment's snapshot at %d differs from the state there", first)
	}

	// A crash after everything was synced.
	if err := o.l.Sync(); err != nil {
		t.Fatal(err)
	}
	want := o.ps.Encode()
	// Recovery trusts the segments below the recovery point (a spot check
	// of one batch header each) and scans those from it on. The recovery
	// point is written without an fsync: take the first crash (of a
	// fixed sequence) that kept it.
	var crashed *vfs.Mem
	var rp int64
	for seed := int64(0); ; seed++ {
		if seed == 100 {
			t.Fatal("no crash kept the recovery point")
		}
		crashed = mem.Crash(rand.New(rand.NewSource(seed)))
		if off, ok := readOffsetFile(crashed, dir+"/"+recoveryPointName); ok && off > first {
			rp = off
			break
		}
	}
	o.l.Close()
	rfs := &readFS{FS: crashed, reads: map[string][]int{}}
	l2, err := Open(rfs, dir, cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LogEndOffset() != o.l.LogEndOffset() {
		t.Fatalf("recovered log end %d, want %d", l2.LogEndOffset(), o.l.LogEndOffset())
	}
	o2 := handOver(l2)
	if !bytes.Equal(o2.ps.Encode(), want) {
		t.Fatal("recovery restored a producer state other than the one before the crash")
	}
	for _, sg := range l2.segs {
		if sg.base >= rp {
			continue
		}
		for _, n := range rfs.reads[fileName(dir, sg.base, logSuffix)] {
			if n > batch.HeaderSize {
				t.Errorf("recovery read %d bytes of trusted segment %d (recovery point %d): it replayed batches below the recovery point instead of starting from the snapshot there", n, sg.base, rp)
			}
		}
	}
}
