package storage

import (
	"bytes"
	"flag"
	"math/rand"
	"testing"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

var (
	crashIters = flag.Int("crash.iters", 500, "iterations of TestCrashRecovery")
	crashSeed  = flag.Int64("crash.seed", -1, "run only this seed of TestCrashRecovery")
)

// crashModel is what the test knows about the log it drives.
type crashModel struct {
	batches map[int64][]byte // base offset -> bytes as stored, for every append
	durable int64            // every batch below this was acknowledged durable
	start   int64            // log start at the time of the crash
	lastPID []byte           // the last idempotent batch appended
}

// TestCrashRecovery drives a log through random appends (leader and
// follower), syncs, truncations and log-start moves on vfs.Mem, crashes it
// at a random point (unsynced writes cut anywhere, unsynced names possibly
// lost), reopens it and checks that the log is valid, holds every batch that
// was acknowledged durable, byte for byte, at its offset, keeps producer
// state for them, and accepts appends; then crashes and recovers once more.
// Replay a failure with -crash.seed=N.
func TestCrashRecovery(t *testing.T) {
	first, last := int64(0), int64(*crashIters)
	if *crashSeed >= 0 {
		first, last = *crashSeed, *crashSeed+1
	}
	if testing.Short() && *crashSeed < 0 {
		last = 100
	}
	for seed := first; seed < last; seed++ {
		crashOnce(t, seed)
		if t.Failed() {
			t.Fatalf("failed at seed %d (rerun with -crash.seed=%d)", seed, seed)
		}
	}
}

func crashOnce(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	cfg := testConfig()
	cfg.SegmentBytes = []int64{512, 2048, 8192}[rng.Intn(3)]
	cfg.IndexIntervalBytes = rng.Intn(600)
	fsys := vfs.NewMem()
	l, err := Open(fsys, "/data/t-0", cfg, t0)
	if err != nil {
		t.Fatalf("seed %d: open: %v", seed, err)
	}
	m := &crashModel{batches: map[int64][]byte{}}
	epochNo := int32(rng.Intn(3))
	seq := int32(0)
	ops := 1 + rng.Intn(80)
	for i := 0; i < ops; i++ {
		if *crashSeed >= 0 {
			t.Logf("op %d: start %d leo %d flushed %d epochs %v", i, l.LogStartOffset(), l.LogEndOffset(), l.FlushedOffset(), l.EpochEntries())
		}
		switch r := rng.Intn(100); {
		case r < 55: // leader append
			s := plain(1+rng.Intn(5), rng.Intn(int(cfg.SegmentBytes/8)), t0.UnixMilli()+int64(i))
			if rng.Intn(3) == 0 {
				s.pid, s.pepoch, s.seq = 77, 0, seq
			}
			if rng.Intn(10) == 0 {
				epochNo++
			}
			b := mkBatch(s)
			info, err := l.AppendAssigning(b, epochNo, t0)
			if err != nil {
				t.Fatalf("seed %d: append: %v", seed, err)
			}
			if !info.Duplicate {
				m.batches[info.FirstOffset] = append([]byte(nil), b...)
				if s.pid >= 0 {
					seq += int32(s.records)
					m.lastPID = m.batches[info.FirstOffset]
				}
			}
		case r < 70: // follower append of several batches
			var buf []byte
			off := l.LogEndOffset()
			for k := 1 + rng.Intn(3); k > 0; k-- {
				b := mkBatch(plain(1+rng.Intn(4), rng.Intn(int(cfg.SegmentBytes/8)), t0.UnixMilli()))
				h, _ := batch.ParseHeader(b)
				batch.SetBaseOffset(b, off)
				batch.SetLeaderEpoch(b, epochNo)
				m.batches[off] = b
				off += int64(h.LastOffsetDelta) + 1
				buf = append(buf, b...)
			}
			if err := l.Append(buf); err != nil {
				t.Fatalf("seed %d: follower append: %v", seed, err)
			}
		case r < 88: // acknowledge: SyncTo the end
			leo := l.LogEndOffset()
			if err := l.SyncTo(leo); err != nil {
				t.Fatalf("seed %d: SyncTo: %v", seed, err)
			}
			m.durable = max(m.durable, leo)
		case r < 93: // follower truncation
			leo := l.LogEndOffset()
			if leo == l.LogStartOffset() {
				continue
			}
			to := l.LogStartOffset() + rng.Int63n(leo-l.LogStartOffset())
			if err := l.TruncateTo(to); err != nil {
				t.Fatalf("seed %d: truncate: %v", seed, err)
			}
			leo = l.LogEndOffset()
			for off := range m.batches {
				if off >= leo {
					delete(m.batches, off)
				}
			}
			m.durable = leo // TruncateTo flushes what remains
			if m.lastPID != nil {
				if h, _ := batch.ParseHeader(m.lastPID); h.BaseOffset >= leo {
					m.lastPID = nil
					seq = 0 // producer state rolled back; start afresh
				}
			}
			if e := l.ProducerEntry(77); e != nil {
				seq = e.Batches[len(e.Batches)-1].LastSeq + 1
			}
		case r < 96: // DeleteRecords
			leo := l.LogEndOffset()
			to := l.LogStartOffset() + rng.Int63n(leo-l.LogStartOffset()+1)
			if err := l.AdvanceLogStart(to); err != nil {
				t.Fatalf("seed %d: advance: %v", seed, err)
			}
		case r < 98: // new leader epoch with no data yet
			epochNo++
			if err := l.AssignEpoch(epochNo, l.LogEndOffset()); err != nil {
				t.Fatalf("seed %d: assign: %v", seed, err)
			}
		default: // retention by size
			cfg.RetentionBytes = 2 * cfg.SegmentBytes
			l.SetConfig(cfg)
			if _, err := l.ApplyRetention(t0, l.FlushedOffset()); err != nil {
				t.Fatalf("seed %d: retention: %v", seed, err)
			}
		}
	}
	m.start = l.LogStartOffset()
	crashed := fsys.Crash(rng)
	if *crashSeed >= 0 {
		for _, n := range []string{"leader-epoch-checkpoint", "log-start-offset", "recovery-point-offset-checkpoint"} {
			b, err := vfs.ReadFile(crashed, "/data/t-0/"+n, 1000)
			t.Logf("%s: %q %v", n, b, err)
		}
	}
	l2, err := Open(crashed, "/data/t-0", cfg, t0)
	if err != nil {
		t.Fatalf("seed %d: recover: %v", seed, err)
	}
	if *crashSeed >= 0 {
		names, _ := crashed.List("/data/t-0")
		var bases []int64
		for _, s := range l2.segs {
			bases = append(bases, s.base)
		}
		t.Logf("recovered: start %d leo %d epochs %v segs %v files %v", l2.LogStartOffset(), l2.LogEndOffset(), l2.EpochEntries(), bases, names)
	}
	checkRecovered(t, seed, l2, m)
	// Unacknowledged batches the crash took are gone for good: from now on
	// the model is what was recovered.
	m.batches = map[int64][]byte{}
	for _, b := range readAll(t, l2) {
		h, _ := batch.ParseHeader(b)
		m.batches[h.BaseOffset] = b
	}
	if m.lastPID != nil {
		if h, _ := batch.ParseHeader(m.lastPID); !bytes.Equal(m.batches[h.BaseOffset], m.lastPID) {
			m.lastPID = nil
		}
	}

	// Appending after recovery works and is readable.
	b := mkBatch(plain(2, 10, t0.UnixMilli()))
	info, err := l2.AppendAssigning(b, l2.LatestEpoch()+1, t0)
	if err != nil {
		t.Fatalf("seed %d: append after recovery: %v", seed, err)
	}
	if err := l2.SyncTo(info.LastOffset + 1); err != nil {
		t.Fatalf("seed %d: sync after recovery: %v", seed, err)
	}
	m.batches[info.FirstOffset] = append([]byte(nil), b...)
	m.durable = info.LastOffset + 1
	m.start = l2.LogStartOffset()
	readAll(t, l2)

	// A second crash, right after recovery and one more append.
	l3, err := Open(crashed.Crash(rng), "/data/t-0", cfg, t0)
	if err != nil {
		t.Fatalf("seed %d: second recovery: %v", seed, err)
	}
	checkRecovered(t, seed, l3, m)
	l3.Close()
	l2.Close()
	l.Close()
}

func checkRecovered(t *testing.T, seed int64, l *Log, m *crashModel) {
	t.Helper()
	got := readAll(t, l)
	present := map[int64][]byte{}
	for _, b := range got {
		h, _ := batch.ParseHeader(b)
		present[h.BaseOffset] = b
		if want, ok := m.batches[h.BaseOffset]; ok && !bytes.Equal(want, b) {
			// Unacknowledged data may be replaced only if it was truncated
			// away; anything at an offset we appended must match.
			t.Errorf("seed %d: batch at %d differs from what was appended", seed, h.BaseOffset)
		}
		if e := epochFor(l, max(h.BaseOffset, l.LogStartOffset())); e != h.LeaderEpoch {
			t.Errorf("seed %d: epoch cache says %d for batch at %d with epoch %d (%v)", seed, e, h.BaseOffset, h.LeaderEpoch, l.EpochEntries())
		}
	}
	start := l.LogStartOffset()
	if start > m.start {
		t.Errorf("seed %d: log start %d beyond %d", seed, start, m.start)
	}
	for off, want := range m.batches {
		h, _ := batch.ParseHeader(want)
		if h.NextOffset() > m.durable || h.NextOffset() <= m.start {
			continue
		}
		if b, ok := present[off]; !ok || !bytes.Equal(b, want) {
			t.Errorf("seed %d: durable batch at %d lost (LEO %d, durable %d)", seed, off, l.LogEndOffset(), m.durable)
		}
	}
	if l.LogEndOffset() < m.durable {
		t.Errorf("seed %d: LEO %d below durable %d", seed, l.LogEndOffset(), m.durable)
	}
	if l.FlushedOffset() != l.LogEndOffset() {
		t.Errorf("seed %d: recovered log not flushed", seed)
	}
	// An acknowledged idempotent batch, retried, is a duplicate.
	if m.lastPID != nil {
		h, _ := batch.ParseHeader(m.lastPID)
		if h.NextOffset() <= m.durable && h.BaseOffset >= start && h.NextOffset() <= l.LogEndOffset() {
			e := l.ProducerEntry(h.ProducerID)
			found := false
			for _, pb := range entryBatches(e) {
				found = found || (pb.FirstOffset == h.BaseOffset && pb.FirstSeq == h.BaseSequence)
			}
			if !found {
				t.Errorf("seed %d: producer state lost acknowledged batch at %d: %+v", seed, h.BaseOffset, e)
			}
		}
	}
}

func epochFor(l *Log, off int64) int32 {
	e := int32(-1)
	for _, x := range l.EpochEntries() {
		if x.StartOffset <= off {
			e = x.Epoch
		}
	}
	return e
}

func entryBatches(e *producer.Entry) []producer.Batch {
	if e == nil {
		return nil
	}
	return e.Batches
}
