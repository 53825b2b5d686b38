package storage

import (
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/vfs"
)

// TestApplyFlush: a round SyncFiles ran makes nothing count as flushed
// until the writer applies it; a truncation between the two voids it
// (the truncation flushed by itself), and the recovery point moves only
// when it is applied.
func TestApplyFlush(t *testing.T) {
	mem := vfs.NewMem()
	l := mustOpen(t, mem, testConfig())
	defer l.Close()
	for i := range 40 {
		if _, err := l.AppendAssigning(mkBatch(plain(2, 100, t0.UnixMilli()+int64(i))), 1, t0); err != nil {
			t.Fatal(err)
		}
	}
	if l.NumSegments() < 2 {
		t.Fatalf("want a roll, have %d segment", l.NumSegments())
	}
	leo := l.LogEndOffset()
	d := l.SyncFiles()
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
	if got := l.FlushedOffset(); got != 0 {
		t.Fatalf("flushed %d before the round was applied", got)
	}
	rp := func() string {
		b, _ := vfs.ReadFile(mem, "/data/topic-0/"+recoveryPointName, 64)
		return strings.TrimSpace(string(b))
	}
	before := rp()
	if err := l.ApplyFlush(d); err != nil {
		t.Fatal(err)
	}
	if got := l.FlushedOffset(); got != leo {
		t.Fatalf("flushed %d after the round, want the log end %d", got, leo)
	}
	if rp() == before {
		t.Fatalf("recovery point still %q after a round past a roll", before)
	}

	// A truncation between the round and its application wins.
	if _, err := l.AppendAssigning(mkBatch(plain(2, 100, t0.UnixMilli())), 1, t0); err != nil {
		t.Fatal(err)
	}
	d = l.SyncFiles()
	if err := l.TruncateTo(leo - 4); err != nil {
		t.Fatal(err)
	}
	if err := l.ApplyFlush(d); err != nil {
		t.Fatal(err)
	}
	if got, end := l.FlushedOffset(), l.LogEndOffset(); got != end {
		t.Fatalf("flushed %d after a stale round, want the truncated end %d", got, end)
	}
}

// TestWriterCheck: with a Writer.Check installed, a change made where it
// says no is counted, by name, and one where it says yes is not.
func TestWriterCheck(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), testConfig())
	defer l.Close()
	mine := false
	l.SetWriter(Writer{Check: func() bool { return mine }})
	if _, err := l.ApplyRetention(t0, 0); err != nil {
		t.Fatal(err)
	}
	mine = true
	if _, err := l.ApplyRetention(t0, 0); err != nil {
		t.Fatal(err)
	}
	if n, ops := l.WriterViolations(); n != 1 || ops != "[ApplyRetention×1]" {
		t.Fatalf("violations %d %s, want 1 [ApplyRetention×1]", n, ops)
	}
}
