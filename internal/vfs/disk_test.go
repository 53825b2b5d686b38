package vfs

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

func TestDiskFaults(t *testing.T) {
	d := NewDiskFaults("/data/")
	fsys := WithFaults(NewMem(), d)
	if err := fsys.MkdirAll("/data/p-0", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll("/other", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create("/data/p-0/seg")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if m, _, n := d.State(); m != DiskOK || n != 0 {
		t.Fatalf("initial state %v fired %d", m, n)
	}

	// Slow: writes and fsyncs under the directory sleep; reads do not.
	d.Set(DiskSlow, 30*time.Millisecond)
	start := time.Now()
	if _, err := f.Write([]byte("d")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 60*time.Millisecond {
		t.Errorf("slow write+sync took %v, want >= 60ms", el) // a lower bound only
	}
	buf := make([]byte, 4)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abcd" {
		t.Fatalf("read %q %v", buf, err)
	}
	if _, _, n := d.State(); n != 2 {
		t.Fatalf("fired %d after a slow write and sync, want 2", n)
	}
	d.Set(DiskSlow, time.Hour)
	if _, delay, _ := d.State(); delay != MaxDiskDelay {
		t.Fatalf("delay %v not capped at %v", delay, MaxDiskDelay)
	}

	// Fail: writes, fsyncs, truncations and creations fail with EIO under
	// the directory only; reads keep working.
	d.Set(DiskFail, time.Second)
	if m, delay, _ := d.State(); m != DiskFail || delay != 0 {
		t.Fatalf("state %v %v", m, delay)
	}
	for name, op := range map[string]func() error{
		"write":    func() error { _, err := f.Write([]byte("x")); return err },
		"writeat":  func() error { _, err := f.WriteAt([]byte("x"), 0); return err },
		"sync":     f.Sync,
		"truncate": func() error { return f.Truncate(1) },
		"create":   func() error { _, err := fsys.Create("/data/p-0/new"); return err },
	} {
		if err := op(); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s in fail mode: %v, want EIO", name, err)
		}
	}
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abcd" {
		t.Fatalf("read in fail mode %q %v", buf, err)
	}
	if _, err := fsys.Create("/other/x"); err != nil {
		t.Fatalf("create outside the directory: %v", err)
	}
	if _, err := fsys.Create("/database"); err != nil {
		t.Fatalf("create of a sibling sharing the prefix: %v", err)
	}
	if _, _, n := d.State(); n != 7 {
		t.Fatalf("fired %d, want 7", n)
	}

	d.Set(DiskOK, 0)
	if _, err := f.Write([]byte("e")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"ok", "slow", "fail"} {
		if m, err := ParseDiskMode(s); err != nil || m.String() != s {
			t.Errorf("ParseDiskMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseDiskMode("broken"); err == nil {
		t.Error("ParseDiskMode accepted an unknown mode")
	}
}
