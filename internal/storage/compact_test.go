package storage

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/vfs"
)

var compactSeeds = flag.Int("compact.seeds", 150, "seeds of TestCompactionModel")

// mrec is one record as the model knows it.
type mrec struct {
	off   int64
	key   string
	value []byte // nil: a tombstone
}

// compactConfig is a small compacted log: segments of a few batches.
func compactConfig() Config {
	c := testConfig()
	c.Delete, c.Compact = false, true
	c.SegmentBytes = 1024
	c.MinCleanableDirtyRatio = 0
	c.DeleteRetentionMs = 0
	return c
}

// appendKeyed appends one batch of keyed records as a leader and returns
// them with their offsets.
func appendKeyed(t testing.TB, l *Log, now time.Time, codec batch.Codec, pid int64, seq int32, kvs ...string) []mrec {
	t.Helper()
	var rs []batchtest.Record
	for i := 0; i+1 < len(kvs); i += 2 {
		r := batchtest.Record{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}
		if kvs[i+1] == "" {
			r.Value = nil
		}
		rs = append(rs, r)
	}
	opts := batchtest.Options{Codec: codec, BaseTimestamp: now.UnixMilli()}
	if pid >= 0 {
		opts.Idempotent, opts.ProducerID, opts.BaseSequence = true, pid, seq
	}
	info, err := l.AppendAssigning(batchtest.Build(opts, rs), 1, now)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	out := make([]mrec, len(rs))
	for i, r := range rs {
		out[i] = mrec{info.FirstOffset + int64(i), string(r.Key), r.Value}
	}
	return out
}

// readRecords reads the whole log as records, checking that offsets only
// grow and that every batch is valid.
func readRecords(t testing.TB, l *Log) []mrec {
	t.Helper()
	var out []mrec
	off, end := l.LogStartOffset(), l.LogEndOffset()
	prev := int64(-1)
	for off < end {
		sl, err := l.Read(off, 1<<20, end)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if sl.Size == 0 {
			t.Fatalf("Read(%d) empty below the log end %d", off, end)
		}
		b, err := sl.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, one, rest, err := batch.Next(b)
			if err != nil || batch.CheckCRC(one) != nil {
				t.Fatalf("bad batch at %d: %v", off, err)
			}
			if h.BaseOffset <= prev {
				t.Fatalf("batch at %d after offset %d", h.BaseOffset, prev)
			}
			err = batch.Records(one, func(r batch.Record) bool {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if o >= l.LogStartOffset() {
					out = append(out, mrec{o, string(r.Key), bytes.Clone(r.Value)})
				}
				return true
			})
			if err != nil {
				t.Fatalf("records at %d: %v", h.BaseOffset, err)
			}
			prev = h.LastOffset()
			off = h.NextOffset()
			b = rest
		}
	}
	return out
}

// checkAgainst verifies the compaction contract against every record ever
// appended (model, by offset): each record read is the one appended at its
// offset, and each key's latest record is still there, unless it is a
// tombstone (which the cleaner may drop once its horizon passed).
func checkAgainst(t testing.TB, l *Log, model []mrec) []mrec {
	t.Helper()
	got := readRecords(t, l)
	byOff := make(map[int64]mrec, len(model))
	latest := map[string]mrec{}
	for _, r := range model {
		if r.off < l.LogEndOffset() {
			byOff[r.off] = r
			latest[r.key] = r
		}
	}
	present := map[int64]bool{}
	for _, r := range got {
		want, ok := byOff[r.off]
		if !ok || want.key != r.key || !bytes.Equal(want.value, r.value) || (want.value == nil) != (r.value == nil) {
			t.Fatalf("offset %d holds %q=%q, appended %q=%q (%v)", r.off, r.key, r.value, want.key, want.value, ok)
		}
		present[r.off] = true
	}
	for k, r := range latest {
		if r.off >= l.LogStartOffset() && !present[r.off] && r.value != nil {
			t.Fatalf("key %q lost its latest value %q at offset %d", k, r.value, r.off)
		}
	}
	return got
}

func TestCompactionBasic(t *testing.T) {
	fs := vfs.NewMem()
	cfg := compactConfig()
	l := mustOpen(t, fs, cfg)
	defer l.Close()
	var model []mrec
	now := t0
	for i := 0; i < 300; i++ {
		k := fmt.Sprintf("k%d", i%10)
		v := fmt.Sprintf("v%d", i)
		if i%37 == 0 {
			v = "" // tombstone
		}
		model = append(model, appendKeyed(t, l, now, batch.Zstd, -1, 0, k, v, "x"+k, v+"x")...)
	}
	segs := l.NumSegments()
	if err := l.Sync(); err != nil { // only flushed data is cleaned
		t.Fatal(err)
	}
	m := NewOffsetMap(1 << 20)
	st, err := l.Clean(now, l.LogEndOffset(), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Segments == 0 || st.RecordsRemoved == 0 {
		t.Fatalf("pass %+v", st)
	}
	// The next pass, with nothing dirty, groups the small cleaned
	// segments (grouping goes by their sizes, as Kafka's does).
	if _, err := l.Clean(now, l.LogEndOffset(), m, nil); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() > segs/4 {
		t.Fatalf("%d segments after two passes, was %d", l.NumSegments(), segs)
	}
	got := checkAgainst(t, l, model)
	active := l.segs[len(l.segs)-1].base
	seen := map[string]bool{}
	for _, r := range got {
		if r.off < active {
			if seen[r.key] {
				t.Fatalf("key %q twice below the active segment", r.key)
			}
			seen[r.key] = true
		}
	}
	// A fetch at a removed offset returns the next batch.
	sl, err := l.Read(1, 1<<20, l.LogEndOffset())
	if err != nil || sl.Size == 0 || sl.NextOffset <= 1 {
		t.Fatalf("read at a removed offset: %+v %v", sl, err)
	}
	// Reopen: the same log, cleaned.
	l.Close()
	l = mustOpen(t, fs, cfg)
	if again := checkAgainst(t, l, model); len(again) != len(got) {
		t.Fatalf("after reopen %d records, before %d", len(again), len(got))
	}
	// Crash and recover: the same.
	l2 := mustOpen(t, fs.Crash(rand.New(rand.NewSource(1))), cfg)
	defer l2.Close()
	checkAgainst(t, l2, model)
}

// TestCompactionModel is the randomized model test: random keyed writes
// (idempotent or not, every codec), tombstones, rolls, cleaning passes with
// small offset maps (several passes per dirty section), config changes,
// clean reopens and crashes that lose unsynced writes; after every step
// every record read is the one appended at its offset, and every key's
// latest value is still there.
func TestCompactionModel(t *testing.T) {
	n := *compactSeeds
	if testing.Short() {
		n = 20
	}
	for seed := 1; seed <= n; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runCompactionModel(t, int64(seed), 300) })
	}
}

func runCompactionModel(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	fs := vfs.NewMem()
	cfg := compactConfig()
	cfg.SegmentBytes = int64(300 + rng.Intn(3000))
	l := mustOpen(t, fs, cfg)
	defer func() { l.Close() }()
	var model []mrec
	now := t0
	keys := 3 + rng.Intn(40)
	codecs := []batch.Codec{batch.None, batch.Gzip, batch.Snappy, batch.LZ4, batch.Zstd}
	seqs := map[int64]int32{}
	nextPid := int64(1)
	removed := int64(0)
	defer func() {
		if removed == 0 && steps >= 300 && !t.Failed() {
			t.Errorf("seed %d: no cleaning pass removed a record", seed)
		}
	}()
	m := NewOffsetMap(0) // the minimum budget: small maps, several passes
	for step := 0; step < steps; step++ {
		switch op := rng.Intn(100); {
		case op < 60:
			var kvs []string
			for i := 0; i < 1+rng.Intn(5); i++ {
				v := fmt.Sprintf("s%d-%d", seed, step*10+i)
				if rng.Intn(8) == 0 {
					v = ""
				}
				kvs = append(kvs, fmt.Sprintf("key-%d", rng.Intn(keys)), v)
			}
			pid := int64(-1)
			if rng.Intn(3) == 0 {
				pid = nextPid + int64(rng.Intn(3))
			}
			rs := appendKeyed(t, l, now, codecs[rng.Intn(len(codecs))], pid, seqs[pid], kvs...)
			if pid >= 0 {
				seqs[pid] += int32(len(rs))
			}
			model = append(model, rs...)
			t.Logf("step %d: append %v at %d..%d pid %d", step, kvs, rs[0].off, rs[len(rs)-1].off, pid)
		case op < 75:
			if rng.Intn(4) == 0 {
				m = NewOffsetMap(rng.Intn(200) * slotSize)
			}
			if rng.Intn(4) != 0 {
				if err := l.Sync(); err != nil { // the broker's flush loop
					t.Fatal(err)
				}
			}
			hw := l.LogEndOffset() - int64(rng.Intn(5))
			st, err := l.Clean(now, max(hw, 0), m, nil)
			removed += st.RecordsRemoved
			if err != nil {
				t.Fatalf("step %d: clean: %v", step, err)
			}
			t.Logf("step %d: clean hw %d: %+v", step, hw, st)
		case op < 82:
			now = now.Add(time.Duration(rng.Intn(5000)) * time.Millisecond)
		case op < 86:
			cfg.DeleteRetentionMs = int64(rng.Intn(3000))
			cfg.MinCompactionLagMs = int64(rng.Intn(2) * rng.Intn(3000))
			cfg.SegmentBytes = int64(300 + rng.Intn(3000))
			if err := l.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
		case op < 89:
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		case op < 93:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, fs, cfg)
			t.Logf("step %d: reopen", step)
		default:
			flushed := l.FlushedOffset()
			crashed := fs.Crash(rng)
			l.Close()
			fs = crashed
			l = mustOpen(t, fs, cfg)
			if l.LogEndOffset() < flushed {
				t.Fatalf("step %d: crash lost synced offsets: end %d < flushed %d", step, l.LogEndOffset(), flushed)
			}
			// What was not synced and did not survive is gone from the
			// model too. Idempotent producers start afresh with new ids:
			// which of their batches survived is not the model's concern.
			model = truncModel(model, l.LogEndOffset())
			t.Logf("step %d: crash: flushed %d, end %d", step, flushed, l.LogEndOffset())
			nextPid += 3
			clear(seqs)
		}
		checkAgainst(t, l, model)
	}
}

func truncModel(model []mrec, end int64) []mrec {
	for len(model) > 0 && model[len(model)-1].off >= end {
		model = model[:len(model)-1]
	}
	return model
}

// crashFS snapshots the Mem with Crash at its n-th namespace change or
// directory sync, so a test can recover from the state at every step of a
// swap.
type crashFS struct {
	*vfs.Mem
	n, at   int
	rng     *rand.Rand
	crashed *vfs.Mem
}

func (c *crashFS) step() {
	c.n++
	if c.n == c.at {
		c.crashed = c.Mem.Crash(c.rng)
	}
}

func (c *crashFS) Create(name string) (vfs.File, error) { c.step(); return c.Mem.Create(name) }
func (c *crashFS) Rename(a, b string) error             { c.step(); return c.Mem.Rename(a, b) }
func (c *crashFS) Remove(name string) error             { c.step(); return c.Mem.Remove(name) }
func (c *crashFS) SyncDir(dir string) error             { c.step(); return c.Mem.SyncDir(dir) }

// TestCompactionCrashAtEveryStep crashes a cleaning pass at each of its
// file-system steps (and several random torn states at each): recovery
// always leaves a log whose every key keeps its latest value at its
// original offset, with either the old segments or the cleaned one.
func TestCompactionCrashAtEveryStep(t *testing.T) {
	build := func() (*vfs.Mem, []mrec) {
		fs := vfs.NewMem()
		l := mustOpen(t, fs, compactConfig())
		var model []mrec
		for i := 0; i < 120; i++ {
			v := fmt.Sprintf("v%d", i)
			if i%11 == 0 {
				v = ""
			}
			model = append(model, appendKeyed(t, l, t0, batch.Snappy, int64(i%2), int32(i/2), fmt.Sprintf("k%d", i%7), v)...)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return fs, model
	}
	// Count the steps of one pass.
	fs, model := build()
	probe := &crashFS{Mem: fs}
	l := mustOpen(t, probe, compactConfig())
	probe.n = 0
	if _, err := l.Clean(t0, l.LogEndOffset(), NewOffsetMap(1<<20), nil); err != nil {
		t.Fatal(err)
	}
	total := probe.n
	l.Close()
	if total < 10 {
		t.Fatalf("only %d steps in a pass", total)
	}
	for at := 1; at <= total; at++ {
		for r := 0; r < 3; r++ {
			fs, _ := build()
			c := &crashFS{Mem: fs, at: at, rng: rand.New(rand.NewSource(int64(at*10 + r)))}
			l := mustOpen(t, c, compactConfig())
			c.n = 0
			if _, err := l.Clean(t0, l.LogEndOffset(), NewOffsetMap(1<<20), nil); err != nil {
				t.Fatal(err)
			}
			l.Close()
			if c.crashed == nil {
				t.Fatalf("step %d never reached", at)
			}
			rec := mustOpen(t, c.crashed, compactConfig())
			checkAgainst(t, rec, model)
			// The recovered log cleans again and stays right.
			if _, err := rec.Clean(t0, rec.LogEndOffset(), NewOffsetMap(1<<20), nil); err != nil {
				t.Fatalf("step %d: clean after recovery: %v", at, err)
			}
			checkAgainst(t, rec, model)
			names, _ := c.crashed.List("/data/topic-0")
			for _, n := range names {
				if bytes.HasSuffix([]byte(n), []byte(swapSuffix)) || bytes.HasSuffix([]byte(n), []byte(cleanedSuffix)) || n == cleanerSwapName {
					t.Fatalf("step %d: %s left after recovery", at, n)
				}
			}
			rec.Close()
		}
	}
}

// TestCompactedFollowerAndTruncation: a follower catching up from a
// compacted leader keeps its gaps, and truncation into a gap ends the log
// at the requested offset.
func TestCompactedFollowerAndTruncation(t *testing.T) {
	leader := mustOpen(t, vfs.NewMem(), compactConfig())
	defer leader.Close()
	var model []mrec
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("k%d", i%5)
		if i%10 == 0 {
			k = fmt.Sprintf("unique%d", i) // never overwritten: kept, with gaps around it
		}
		model = append(model, appendKeyed(t, leader, t0, batch.None, -1, 0, k, fmt.Sprintf("v%d", i))...)
	}
	if err := leader.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Clean(t0, leader.LogEndOffset(), NewOffsetMap(1<<20), nil); err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, vfs.NewMem(), compactConfig())
	defer f.Close()
	for off := int64(0); off < leader.LogEndOffset(); {
		sl, err := leader.Read(off, 700, leader.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := sl.AppendTo(nil)
		if err := f.Append(b); err != nil {
			t.Fatalf("follower append at %d: %v", off, err)
		}
		off = f.LogEndOffset()
	}
	if f.LogEndOffset() != leader.LogEndOffset() {
		t.Fatalf("follower end %d, leader %d", f.LogEndOffset(), leader.LogEndOffset())
	}
	got := checkAgainst(t, f, model)
	if len(got) != len(readRecords(t, leader)) {
		t.Fatal("follower and leader differ")
	}
	// Truncate into the first gap.
	gap := int64(-1)
	for i := 1; i < len(got); i++ {
		if got[i].off > got[i-1].off+1 {
			gap = got[i-1].off + 1
			break
		}
	}
	if gap < 0 {
		t.Fatal("no gap after cleaning")
	}
	if err := f.TruncateTo(gap); err != nil {
		t.Fatal(err)
	}
	if f.LogEndOffset() != gap {
		t.Fatalf("truncated to %d: end %d", gap, f.LogEndOffset())
	}
	checkAgainst(t, f, truncModel(model, gap))
}

// TestReadersDuringCleaning: a read located before a swap finishes on the
// old segment's bytes (its files close file.delete.delay.ms later), and a
// reader running through cleaning passes and appends never fails, never
// reads a torn batch and always gets past every offset.
func TestReadersDuringCleaning(t *testing.T) {
	cfg := compactConfig()
	cfg.FileDeleteDelayMs = 60000
	l := mustOpen(t, vfs.NewMem(), cfg)
	defer l.Close()
	var model []mrec
	for i := 0; i < 200; i++ {
		model = append(model, appendKeyed(t, l, t0, batch.Gzip, -1, 0, fmt.Sprintf("k%d", i%8), fmt.Sprintf("v%d", i))...)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	old, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(t0, l.LogEndOffset(), NewOffsetMap(1<<20), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := old.AppendTo(nil); err != nil {
		t.Fatalf("a read located before the swap failed after it: %v", err)
	}
	// Concurrent readers and writers through repeated passes.
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-stop:
				return
			default:
			}
			end := l.LogEndOffset()
			empties := 0
			for off := l.LogStartOffset(); off < end; {
				sl, err := l.Read(off, 4096, end)
				if err == nil && sl.Size == 0 {
					// A pass bounded by a newer end than this reader's may
					// have left no batch between off and end (the next
					// one starts past end): as a consumer whose high
					// watermark is stale, read again with a fresh one.
					if empties++; empties > 100 {
						err = fmt.Errorf("empty reads at %d below %d", off, end)
					} else {
						end = l.LogEndOffset()
						continue
					}
				}
				if err != nil {
					errc <- err
					return
				}
				empties = 0
				b, err := sl.AppendTo(nil)
				for err == nil && len(b) > 0 {
					var one []byte
					if _, one, b, err = batch.Next(b); err == nil {
						err = batch.CheckCRC(one)
					}
				}
				if err != nil {
					errc <- fmt.Errorf("read at %d: %w", off, err)
					return
				}
				off = sl.NextOffset
			}
		}
	}()
	m := NewOffsetMap(1 << 20)
	for i := 200; i < 600; i++ {
		model = append(model, appendKeyed(t, l, t0, batch.None, -1, 0, fmt.Sprintf("k%d", i%8), fmt.Sprintf("v%d", i))...)
		if i%20 == 0 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Clean(t0, l.LogEndOffset(), m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, l, model)
}

// TestRecoveryKeepsEpochsOfCleanedBatches: compaction may remove every
// record of a leader epoch, but keeps the epoch's first batch (emptied),
// so a replica copying the cleaned log learns the epoch; and crash
// recovery keeps the checkpoint's entries rather than re-deriving the
// cache from the batches left. Either loss would hide a follower's
// divergence.
func TestRecoveryKeepsEpochsOfCleanedBatches(t *testing.T) {
	fsys := vfs.NewMem()
	l := mustOpen(t, fsys, compactConfig())
	for e := int32(1); e <= 3; e++ {
		b := batchtest.Build(batchtest.Options{BaseTimestamp: t0.UnixMilli()}, []batchtest.Record{{Key: []byte("k"), Value: []byte(fmt.Sprint(e))}})
		if _, err := l.AppendAssigning(b, e, t0); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; l.NumSegments() < 3; i++ { // epoch 4 rolls k's segment
		b := batchtest.Build(batchtest.Options{BaseTimestamp: t0.UnixMilli()}, []batchtest.Record{{Key: []byte(fmt.Sprint("f", i)), Value: make([]byte, 200)}})
		if _, err := l.AppendAssigning(b, 4, t0); err != nil {
			t.Fatal(err)
		}
	}
	want := l.EpochEntries()
	if len(want) != 4 {
		t.Fatalf("epochs %v", want)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(t0, l.LogEndOffset(), NewOffsetMap(1<<20), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readRecords(t, l); got[0].off != 2 {
		t.Fatalf("the cleaner kept the record at %d; epochs 1 and 2 should have no record left", got[0].off)
	}
	// A replica copying the cleaned log learns every epoch: the first
	// batch of each stays, emptied (compact.go, epochStarts).
	sl, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	data, err := sl.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := Open(vfs.NewMem(), "/data/copy-0", compactConfig(), t0)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.Append(data); err != nil {
		t.Fatal(err)
	}
	if got := cp.EpochEntries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("a copy of the cleaned log has epochs %v, want %v", got, want)
	}
	crashed := fsys.Crash(rand.New(rand.NewSource(1)))
	// No recovery point: the crash recovery scans every segment.
	if err := crashed.Remove("/data/topic-0/recovery-point-offset-checkpoint"); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(crashed, "/data/topic-0", compactConfig(), t0)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := l2.EpochEntries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("recovered epochs %v, want %v", got, want)
	}
}
