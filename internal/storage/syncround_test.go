package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/sluice-io/sluice/internal/vfs"
)

// syncRoundHistory appends to two logs of one Mem (enough to roll
// segments: new names, sealed indexes, snapshots), runs one BeginSync per
// log, appends more, then syncs the filesystem with sync (nil: not at all)
// and ends the rounds. It returns the Mem, each log's batches and the
// offsets the rounds made flushed.
func syncRoundHistory(t *testing.T, sync func(vfs.FSSyncer) error) (*vfs.Mem, [2][][]byte, [2]int64) {
	t.Helper()
	mem := vfs.NewMem()
	fsys := vfs.WithHandleCache(mem, 3)
	var logs [2]*Log
	var batches [2][][]byte
	for i := range logs {
		l, err := Open(fsys, fmt.Sprintf("/data/t-%d", i), testConfig(), t0)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
		batches[i] = appendN(t, l, 40+i*7, 3, 30, 0) // several segments
	}
	s, err := vfs.SyncFSOf(fsys, "/data")
	if err != nil || s == nil {
		t.Fatalf("SyncFSOf = %v, %v", s, err)
	}
	var rounds [2]*SyncRound
	var ends [2]int64
	for i, l := range logs {
		ends[i] = l.LogEndOffset()
		rounds[i] = l.BeginSync()
	}
	for i, l := range logs {
		batches[i] = append(batches[i], appendN(t, l, 5, 3, 30, 0)...) // after the capture
	}
	var serr error
	if sync != nil {
		serr = sync(s)
	}
	var flushed [2]int64
	for i, l := range logs {
		err := rounds[i].End(serr)
		if (err != nil) != (serr != nil) {
			t.Fatalf("End(%v) = %v", serr, err)
		}
		if serr == nil && l.FlushedOffset() != ends[i] {
			t.Fatalf("log %d: flushed %d after the round, want the captured end %d (log end %d)", i, l.FlushedOffset(), ends[i], l.LogEndOffset())
		}
		flushed[i] = l.FlushedOffset()
	}
	return mem, batches, flushed
}

// TestSyncRoundCrash: what a SyncRound ended after one SyncFS made
// flushed survives every crash; the appends after BeginSync are not
// counted.
func TestSyncRoundCrash(t *testing.T) {
	mem, batches, flushed := syncRoundHistory(t, func(s vfs.FSSyncer) error { return s.SyncFS("/data") })
	for seed := int64(0); seed < 100; seed++ {
		c := mem.Crash(rand.New(rand.NewSource(seed)))
		for i := range batches {
			l, err := Open(c, fmt.Sprintf("/data/t-%d", i), testConfig(), t0)
			if err != nil {
				t.Fatalf("seed %d: reopen %d: %v", seed, i, err)
			}
			if l.LogEndOffset() < flushed[i] {
				t.Fatalf("seed %d: log %d recovered to %d, below its flushed %d", seed, i, l.LogEndOffset(), flushed[i])
			}
			got := readAll(t, l)
			for j := 0; j < len(got) && j < len(batches[i]); j++ {
				if !bytes.Equal(got[j], batches[i][j]) {
					t.Fatalf("seed %d: log %d batch %d differs after the crash", seed, i, j)
				}
			}
			l.Close()
		}
	}
}

// TestSyncRoundWithoutSyncFSLoses is the control of TestSyncRoundCrash:
// ending the rounds without syncing the filesystem, some crash loses
// flushed data (so the test above can fail).
func TestSyncRoundWithoutSyncFSLoses(t *testing.T) {
	mem, _, flushed := syncRoundHistory(t, nil)
	for seed := int64(0); seed < 100; seed++ {
		c := mem.Crash(rand.New(rand.NewSource(seed)))
		l, err := Open(c, "/data/t-0", testConfig(), t0)
		if err != nil {
			continue
		}
		end := l.LogEndOffset()
		l.Close()
		if end < flushed[0] {
			return
		}
	}
	t.Fatal("no crash lost data no SyncFS covered: the crash test shows nothing")
}

// TestSyncRoundFailure: a failed SyncFS fails every log of the round as
// a failed fsync does, and nothing more becomes flushed.
func TestSyncRoundFailure(t *testing.T) {
	mem := vfs.NewMem()
	rule := &vfs.Rule{Ops: []vfs.Op{vfs.OpSyncFS}}
	rule.Disable()
	fsys := vfs.WithFaults(mem, rule)
	var logs []*Log
	var before []int64
	for i := range 3 {
		l, err := Open(fsys, fmt.Sprintf("/data/t-%d", i), testConfig(), t0)
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 3, 1, 10, 0)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 3, 1, 10, 0)
		logs = append(logs, l)
		before = append(before, l.FlushedOffset())
	}
	s, _ := vfs.SyncFSOf(fsys, "/data")
	var rounds []*SyncRound
	for _, l := range logs {
		rounds = append(rounds, l.BeginSync())
	}
	rule.Enable()
	serr := s.SyncFS("/data")
	if !errors.Is(serr, vfs.ErrInjected) {
		t.Fatalf("SyncFS = %v", serr)
	}
	rule.Disable()
	for i, l := range logs {
		if err := rounds[i].End(serr); !errors.Is(err, ErrFailed) {
			t.Fatalf("log %d: End = %v, want ErrFailed", i, err)
		}
		if l.FlushedOffset() != before[i] {
			t.Fatalf("log %d: flushed %d after a failed round, was %d", i, l.FlushedOffset(), before[i])
		}
		if err := l.Sync(); !errors.Is(err, ErrFailed) {
			t.Fatalf("log %d: Sync after the failed round = %v", i, err)
		}
		l.Close()
	}
}

// TestSyncRoundSharesWithSync: a Sync called while a SyncRound runs waits
// for it and then runs its own round.
func TestSyncRoundSharesWithSync(t *testing.T) {
	mem := vfs.NewMem()
	l := mustOpen(t, mem, testConfig())
	defer l.Close()
	appendN(t, l, 3, 1, 10, 0)
	r := l.BeginSync()
	done := make(chan error)
	go func() { done <- l.Sync() }()
	appendN(t, l, 2, 1, 10, 0)
	select {
	case err := <-done:
		t.Fatalf("Sync returned during a running SyncRound: %v", err)
	default:
	}
	if err := mem.SyncFS("/data"); err != nil {
		t.Fatal(err)
	}
	if err := r.End(nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l.FlushedOffset() != l.LogEndOffset() {
		t.Fatalf("flushed %d, end %d", l.FlushedOffset(), l.LogEndOffset())
	}
}
