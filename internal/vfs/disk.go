package vfs

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// DiskMode is what a DiskFaults injector does to the disk it wraps.
type DiskMode int32

// Disk modes.
const (
	DiskOK   DiskMode = iota // no fault
	DiskSlow                 // every Write, WriteAt, Sync and SyncFS sleeps first
	DiskFail                 // every Write, WriteAt, Sync, SyncFS, Truncate and Create fails with EIO
)

var diskModeNames = [...]string{"ok", "slow", "fail"}

// String is the mode's name: ok, slow or fail.
func (m DiskMode) String() string {
	if m >= 0 && int(m) < len(diskModeNames) {
		return diskModeNames[m]
	}
	return "mode?"
}

// ParseDiskMode parses ok, slow or fail.
func ParseDiskMode(s string) (DiskMode, error) {
	for i, n := range diskModeNames {
		if s == n {
			return DiskMode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown disk mode %q (want ok, slow or fail)", s)
}

// MaxDiskDelay caps the delay of DiskSlow.
const MaxDiskDelay = 10 * time.Second

// DiskFaults is a switchable Injector that simulates a slow or failing disk
// under one directory (a broker's data directory): use it with WithFaults.
// Reads, opens, renames, removals and directory syncs are never affected.
// It starts in DiskOK; its methods are safe for concurrent use.
type DiskFaults struct {
	dir   string
	state atomic.Pointer[diskState]
	fired atomic.Int64
}

type diskState struct {
	mode  DiskMode
	delay time.Duration
}

// NewDiskFaults returns an injector affecting the files under dir.
func NewDiskFaults(dir string) *DiskFaults {
	d := &DiskFaults{dir: filepath.Clean(dir)}
	d.state.Store(&diskState{})
	return d
}

// Set switches the mode. delay matters for DiskSlow only and is capped at
// MaxDiskDelay.
func (d *DiskFaults) Set(mode DiskMode, delay time.Duration) {
	if mode != DiskSlow {
		delay = 0
	}
	d.state.Store(&diskState{mode: mode, delay: min(max(delay, 0), MaxDiskDelay)})
}

// State returns the mode, its delay and how many operations were slowed or
// failed since the injector was created (all modes together).
func (d *DiskFaults) State() (mode DiskMode, delay time.Duration, fired int64) {
	st := d.state.Load()
	return st.mode, st.delay, d.fired.Load()
}

// MaybeError implements Injector.
func (d *DiskFaults) MaybeError(op Op, name string) error {
	st := d.state.Load()
	switch st.mode {
	case DiskSlow:
		if (op == OpWrite || op == OpWriteAt || op == OpSync || op == OpSyncFS) && d.under(name) {
			d.fired.Add(1)
			time.Sleep(st.delay)
		}
	case DiskFail:
		switch op {
		case OpWrite, OpWriteAt, OpSync, OpSyncFS, OpTruncate, OpCreate:
			if d.under(name) {
				d.fired.Add(1)
				return syscall.EIO
			}
		}
	}
	return nil
}

// under reports whether name is dir or a path inside it.
func (d *DiskFaults) under(name string) bool {
	if d.dir == "." {
		return !filepath.IsAbs(name)
	}
	name = filepath.Clean(name)
	return name == d.dir || strings.HasPrefix(name, d.dir+string(filepath.Separator)) || d.dir == string(filepath.Separator)
}
