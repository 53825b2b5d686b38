// Package dirlock takes the exclusive lock on a data directory that keeps
// two processes from using it at once, as Kafka's LogManager does with a
// ".lock" file in every log directory (LogManager.lockLogDirs). The lock is
// an flock(2) on DIR/.lock held by an open descriptor for the life of the
// process: the kernel releases it when the process exits, however it exits
// (SIGKILL included), so a stale file never blocks a restart. The file
// holds the owner's pid, which a second process names in its error.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/vfs"
)

// FileName is the lock file's name inside the data directory (Kafka's
// LogManager.LockFileName).
const FileName = ".lock"

// Lock is a held data-directory lock.
type Lock struct {
	f   *os.File
	dir string
}

// InUseError is Acquire's error when another process holds the lock.
type InUseError struct {
	// Dir is the data directory.
	Dir string
	// Owner names the holder: "pid N", or "another process" when the
	// lock file names none.
	Owner string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("data directory %s is in use by %s", e.Dir, e.Owner)
}

// Acquire creates dir if needed (durably: the parents of what it creates
// are synced, so synced data inside survives a crash) and locks it, failing at once (never
// waiting) when another process holds the lock, with an *InUseError
// ("data directory DIR is in use by pid N").
func Acquire(dir string) (*Lock, error) {
	if err := vfs.MkdirAllDurable(vfs.Default, dir); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, &InUseError{Dir: dir, Owner: owner(path)}
		}
		return nil, fmt.Errorf("data directory %s: locking %s: %w", dir, path, err)
	}
	// Record the owner for the next process's message. Best effort: the
	// lock, not the content, is what excludes.
	pid := strconv.Itoa(os.Getpid()) + "\n"
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(pid), 0)
	}
	return &Lock{f: f, dir: dir}, nil
}

// owner describes the lock's holder from the pid in the file.
func owner(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "another process"
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return "another process"
	}
	return "pid " + strconv.Itoa(pid)
}

// Dir returns the locked directory.
func (l *Lock) Dir() string { return l.dir }

// Release unlocks the directory. The lock file stays (as Kafka's does);
// its presence means nothing without the flock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
