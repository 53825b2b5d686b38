package storage

import (
	"errors"
	"testing"

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
