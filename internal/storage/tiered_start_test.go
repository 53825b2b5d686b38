package storage

import (
	"errors"
	"testing"

	"github.com/sluice-io/sluice/internal/vfs"
)

// TestTruncateFullyAndStartTiered: a follower rebuilt from the remote log
// restarts empty at the local start with its log start below it, reads
// below the local start answer ErrOffsetTiered, and a reopen keeps both.
func TestTruncateFullyAndStartTiered(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig()
	cfg.RemoteStorage = true
	l := mustOpen(t, fsys, cfg)
	appendN(t, l, 10, 2, 50, 1)
	if err := l.TruncateFullyAndStartTiered(60, 50); err == nil {
		t.Fatal("a log start above the local start was taken")
	}
	if err := l.TruncateFullyAndStartTiered(40, 500); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		if l.LogStartOffset() != 40 || l.LocalLogStartOffset() != 500 || l.LogEndOffset() != 500 {
			t.Fatalf("log start %d, local start %d, end %d; want 40, 500, 500", l.LogStartOffset(), l.LocalLogStartOffset(), l.LogEndOffset())
		}
		if _, err := l.Read(45, 100, 1<<62); !errors.Is(err, ErrOffsetTiered) {
			t.Fatalf("read below the local start: %v", err)
		}
	}
	check(l)
	appendN(t, l, 3, 2, 50, 1)
	l.Close()
	l = mustOpen(t, fsys, cfg)
	defer l.Close()
	if l.LogEndOffset() != 506 {
		t.Fatalf("log end %d after reopen", l.LogEndOffset())
	}
	if l.LogStartOffset() != 40 || l.LocalLogStartOffset() != 500 {
		t.Fatalf("after reopen: log start %d, local start %d", l.LogStartOffset(), l.LocalLogStartOffset())
	}
}
