package vfs

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// FSSyncer makes a whole filesystem durable in one call: Linux's
// syncfs(2), instead of one fsync per file. Get one with SyncFSOf.
type FSSyncer interface {
	// SyncFS makes durable every byte written so far to every file of the
	// filesystem holding dir, and every creation, removal and rename of a
	// name on it, as File.Sync of each file and SyncDir of each directory
	// would. An error means that some of it may be lost, as after a failed
	// File.Sync; on an operating-system filesystem the error may come from
	// any file of that filesystem, the caller's or not.
	SyncFS(dir string) error
}

// syncFSer is implemented by the FSs that can give an FSSyncer.
type syncFSer interface {
	syncFSOf(dir string) (FSSyncer, error)
}

// ErrNoSyncFS is returned by an FSSyncer whose filesystem cannot sync
// itself as a whole after all.
var ErrNoSyncFS = errors.New("vfs: syncfs not supported")

// SyncFSOf returns an FSSyncer for the filesystem of fsys holding dir, or
// nil if fsys cannot sync a whole filesystem: the operating system's FS
// can on Linux 5.8 and later (earlier kernels' syncfs does not report
// writeback errors), Mem can, and WithFaults and WithHandleCache can when
// what they wrap can.
//
// The operating system's FSSyncer opens dir now and keeps it open: syncfs
// reports a writeback error to a descriptor that was open when the error
// happened (or that nobody had seen yet when it was opened), so get the
// FSSyncer before writing what its SyncFS calls must cover, and keep it;
// it implements io.Closer to let that descriptor go.
func SyncFSOf(fsys FS, dir string) (FSSyncer, error) {
	s, ok := fsys.(syncFSer)
	if !ok {
		return nil, nil
	}
	return s.syncFSOf(dir)
}

// syncFSOf implements syncFSer: Mem is its own FSSyncer.
func (m *Mem) syncFSOf(dir string) (FSSyncer, error) {
	if _, err := m.Stat(dir); err != nil {
		return nil, err
	}
	return m, nil
}

// SyncFS implements FSSyncer: every pending name change and every file's
// unsynced writes become durable, the whole Mem's (it is one filesystem).
func (m *Mem) SyncFS(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.lookup("syncfs", dir)
	if err != nil {
		return err
	}
	if !d.dir {
		return fmt.Errorf("syncfs %s: %w", dir, errNotDir)
	}
	for _, op := range m.pending {
		op.apply(func(n *memNode) map[string]*memNode { return n.durableChildren })
	}
	clear(m.pending)
	m.pending = m.pending[:0]
	// Every name is now durable: the files reachable from the root are
	// exactly those a crash can leave. (A file removed meanwhile cannot
	// come back, so its contents do not matter.)
	seen := map[*memNode]bool{}
	var walk func(n *memNode)
	walk = func(n *memNode) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			n.sync()
			return
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(m.root)
	return nil
}

func (f *faultFS) syncFSOf(dir string) (FSSyncer, error) {
	s, err := SyncFSOf(f.fs, dir)
	if s == nil || err != nil {
		return nil, err
	}
	return faultSyncer{s: s, fs: f}, nil
}

// faultSyncer asks the injector (OpSyncFS, the directory's name) before
// each SyncFS.
type faultSyncer struct {
	s  FSSyncer
	fs *faultFS
}

// Close closes the wrapped FSSyncer if it has a Close.
func (f faultSyncer) Close() error {
	if c, ok := f.s.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (f faultSyncer) SyncFS(dir string) error {
	if err := f.fs.check(OpSyncFS, dir); err != nil {
		return err
	}
	return f.s.SyncFS(dir)
}

func (c *HandleCache) syncFSOf(dir string) (FSSyncer, error) { return SyncFSOf(c.FS, dir) }

// kernelAtLeast reports whether a release string such as "5.15.0-91-generic"
// is major.minor or later.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	num := func(s string) int {
		end := 0
		for end < len(s) && s[end] >= '0' && s[end] <= '9' {
			end++
		}
		n, err := strconv.Atoi(s[:end])
		if err != nil {
			return -1
		}
		return n
	}
	maj, min := num(parts[0]), num(parts[1])
	return maj > major || (maj == major && min >= minor)
}
