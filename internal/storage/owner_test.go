package storage

import (
	"bytes"
	"flag"
	"math/rand"
	"reflect"
	"testing"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

var (
	ownedIters = flag.Int("owned.iters", 1000, "seeds of TestOwnedLogRecovers")
	ownedSeed  = flag.Int64("owned.seed", -1, "run only this seed of TestOwnedLogRecovers, logging each step")
)

// testOwner plays the replica machine for an owned log: it applies every
// batch itself and has the log persist what it decided (owner.go).
type testOwner struct {
	l      *Log
	epochs *epoch.Cache
	ps     *producer.State
}

func handOver(l *Log) *testOwner {
	o := &testOwner{l: l}
	entries, ps := l.HandOver(func() *producer.State { return o.ps.Clone() })
	o.epochs, o.ps = epoch.New(entries), ps
	return o
}

// append writes b (offsets and epoch set) as the broker's processReady
// does: epochs first, then the batch with its aborted-index entry.
func (o *testOwner) append(t *testing.T, b []byte) {
	t.Helper()
	h, err := batch.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if o.epochs.Assign(h.LeaderEpoch, h.BaseOffset) {
		if err := o.l.SetEpochs(o.epochs.Entries()); err != nil {
			t.Fatal(err)
		}
	}
	var aborted []AbortedTxn
	if a, ok := applyProducer(o.ps, &h, b); ok {
		aborted = append(aborted, a)
	}
	if err := o.l.Append(b, aborted...); err != nil {
		t.Fatal(err)
	}
}

// truncate cuts the log and takes the producer state rebuilt from the
// disk, as the broker does after a follower's truncation.
func (o *testOwner) truncate(t *testing.T, off int64) {
	t.Helper()
	if err := o.l.TruncateTo(off); err != nil {
		t.Fatal(err)
	}
	if o.epochs.TruncateFromEnd(o.l.LogEndOffset()) {
		if err := o.l.SetEpochs(o.epochs.Entries()); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := o.l.ProducerState()
	if err != nil {
		t.Fatal(err)
	}
	o.ps = ps
}

// reference replays every batch of l from offset 0 into a fresh producer
// state, epoch cache and aborted index: what the log must recover.
func reference(t *testing.T, l *Log) (*producer.State, []epoch.Entry, []AbortedTxn) {
	t.Helper()
	ps, ec := producer.NewState(), &epoch.Cache{}
	aborted := []AbortedTxn{}
	for _, b := range readAll(t, l) {
		h, _ := batch.ParseHeader(b)
		ec.Assign(h.LeaderEpoch, h.BaseOffset)
		if a, ok := applyProducer(ps, &h, b); ok {
			aborted = append(aborted, a)
		}
	}
	ps.ExpireBefore(l.lastNowMs - l.cfg.ProducerIDExpirationMs)
	return ps, ec.Entries(), aborted
}

// TestOwnedLogRecovers: an owned log (HandOver) whose owner applies the
// batches, sets the epochs, hands in the aborted-index entries and writes
// snapshots after rolls recovers, after a clean close or a crash at any
// point, the same producer state, epochs and aborted index as a replay of
// its surviving batches from the start; so does ProducerState after a
// truncation.
func TestOwnedLogRecovers(t *testing.T) {
	if *ownedSeed >= 0 {
		ownedRun(t, *ownedSeed)
		return
	}
	for seed := int64(0); seed < int64(*ownedIters); seed++ {
		ownedRun(t, seed)
		if t.Failed() {
			return
		}
	}
}

func ownedRun(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	fsys := vfs.NewMem()
	open := func(fsys vfs.FS) *testOwner {
		l, err := Open(fsys, "/data/topic-0", cfg, t0)
		if err != nil {
			t.Fatalf("seed %d: open: %v", seed, err)
		}
		return handOver(l)
	}
	check := func(o *testOwner, when string) {
		t.Helper()
		ps, entries, aborted := reference(t, o.l)
		if got := o.ps.Encode(); !bytes.Equal(got, ps.Encode()) {
			t.Fatalf("seed %d, %s: the owner's producer state differs from a replay of the log", seed, when)
		}
		if got := o.l.EpochEntries(); !reflect.DeepEqual(got, entries) && !(len(got) == 0 && len(entries) == 0) {
			t.Fatalf("seed %d, %s: epochs %v, a replay gives %v", seed, when, got, entries)
		}
		if got := o.l.AbortedTxns(0, o.l.LogEndOffset()); !reflect.DeepEqual(got, aborted) && !(len(got) == 0 && len(aborted) == 0) {
			t.Fatalf("seed %d, %s: aborted index %+v, a replay gives %+v", seed, when, got, aborted)
		}
	}
	o := open(fsys)
	epochNo := int32(0)
	seqs := map[int64]int32{}
	for i := 0; i < 120; i++ {
		off := o.l.LogEndOffset()
		var b []byte
		r := rng.Intn(100)
		if *ownedSeed >= 0 {
			t.Logf("op %d: r %d leo %d start %d", i, r, off, o.l.LogStartOffset())
		}
		switch {
		case r < 30:
			b = mkBatch(plain(1+rng.Intn(3), rng.Intn(100), t0.UnixMilli()))
		case r < 60: // a transactional batch of one of three producers
			pid := int64(1 + rng.Intn(3))
			n := 1 + rng.Intn(3)
			b = txnBatch(pid, seqs[pid], n)
			seqs[pid] += int32(n)
		case r < 80: // a marker, mostly for an open transaction
			pid := int64(1 + rng.Intn(3))
			b = batch.EncodeMarker(pid, 0, batch.Marker{Commit: rng.Intn(2) == 0, CoordinatorEpoch: 1}, t0.UnixMilli())
		case r < 85:
			epochNo++
			continue
		case r < 90 && off > 0:
			o.truncate(t, rng.Int63n(off))
			check(o, "after a truncation")
			continue
		case r < 95:
			if rng.Intn(2) == 0 {
				if err := o.l.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			crashed := fsys.Crash(rng)
			o.l.Close()
			fsys = crashed
			o = open(fsys)
			if *ownedSeed >= 0 {
				for _, sg := range o.l.segs {
					t.Logf("after the crash: segment %d next %d size %d aborted %+v", sg.base, sg.next, sg.size, sg.aborted)
				}
				names, _ := fsys.List("/data/topic-0")
				t.Logf("files %v", names)
			}
			check(o, "after a crash")
			continue
		default:
			if rng.Intn(2) == 0 {
				// The broker's clean close: the owner's snapshot first.
				if err := o.l.WriteProducerSnapshot(o.ps.Encode()); err != nil {
					t.Fatal(err)
				}
			}
			if err := o.l.Close(); err != nil {
				t.Fatal(err)
			}
			o = open(fsys)
			check(o, "after a clean close")
			continue
		}
		batch.SetBaseOffset(b, off)
		batch.SetLeaderEpoch(b, epochNo)
		fixCRC(b)
		o.append(t, b)
		check(o, "after an append")
	}
}
