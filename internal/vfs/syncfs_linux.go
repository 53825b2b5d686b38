package vfs

import (
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// syncfsReportsErrors is whether the running kernel's syncfs(2) returns
// writeback errors: Linux 5.8 and later.
var syncfsReportsErrors = sync.OnceValue(func() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 8)
})

func (osFS) syncFSOf(dir string) (FSSyncer, error) {
	if !syncfsReportsErrors() {
		return nil, nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &osSyncer{dir: filepath.Clean(dir), d: d}, nil
}

// osSyncer holds a descriptor of its directory for as long as it lives:
// the kernel reports to a descriptor each writeback error of the
// filesystem that happened after the descriptor was opened (or that nobody
// had seen when it was), once.
type osSyncer struct {
	dir string
	d   *os.File
}

// Close closes the directory's descriptor; SyncFS fails after it.
func (s *osSyncer) Close() error { return s.d.Close() }

func (s *osSyncer) SyncFS(dir string) error {
	if filepath.Clean(dir) != s.dir {
		// Another directory may be another filesystem.
		return &os.PathError{Op: "syncfs", Path: dir, Err: ErrNoSyncFS}
	}
	rc, err := s.d.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.Syncfs(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "syncfs", Path: dir, Err: serr}
	}
	return nil
}
