// Package vfs is the small filesystem interface all of sluice's storage goes
// through, after pebble's vfs package. There are three implementations:
//
//   - Default, the operating system's filesystem;
//   - NewMem, an in-memory filesystem that can simulate a power loss
//     (Mem.Crash), for crash-recovery tests and the simulator;
//   - WithFaults, a wrapper that injects errors or delays into chosen
//     operations (pebble's errorfs).
//
// Durability follows POSIX: data written to a File is durable once File.Sync
// returns; the creation, removal or renaming of a name is durable once
// SyncDir on the directory holding it returns. Mem models exactly that and
// nothing stronger (see Mem.Crash).
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// File is an open file. ReadAt may be called concurrently with Write, Sync
// and other ReadAt calls; ReadAt never observes a partially applied Write
// beyond what that Write has returned for (callers track visible lengths
// themselves). Write, WriteAt and Truncate must not be called concurrently
// with each other.
type File interface {
	io.ReaderAt
	// Write appends p at the end of the file, wherever the file's end is
	// (it never depends on a seek position).
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes every byte written so far durable (fsync).
	Sync() error
	// Truncate changes the size of the file; later Writes append at size.
	Truncate(size int64) error
	// Size is the current size of the file in bytes.
	Size() (int64, error)
}

// OSFiler is implemented by files backed by an operating-system file, so
// callers can use zero-copy system calls (sendfile). The returned *os.File
// must not be closed, seeked or written through by the caller.
type OSFiler interface {
	OSFile() *os.File
}

// OSPinner is implemented by files that hold an operating-system file only
// part of the time (HandleCache): PinOS returns it held open until release
// is called, or a nil file if there is none underneath.
type OSPinner interface {
	PinOS() (f *os.File, release func(), err error)
}

// FS is a filesystem. Names are slash- or OS-separated paths; Mem cleans them
// with filepath.Clean.
type FS interface {
	// Create creates name, truncating it if it exists, opened read-write.
	Create(name string) (File, error)
	// OpenReadWrite opens name read-write, creating it empty if missing and
	// keeping its contents otherwise.
	OpenReadWrite(name string) (File, error)
	// Open opens name read-only.
	Open(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything below it; a missing name is not
	// an error.
	RemoveAll(name string) error
	// Rename atomically renames oldname to newname, replacing newname.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes name. A missing name gives an error matching
	// os.ErrNotExist.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the creations, removals and renames of entries of dir
	// durable (fsync of the directory).
	SyncDir(dir string) error
}

// Exists reports whether name exists in fsys.
func Exists(fsys FS, name string) (bool, error) {
	_, err := fsys.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// ReadFile reads the whole of name, refusing files larger than maxBytes (a
// limit on what a corrupt or hostile file can make the caller allocate).
func ReadFile(fsys FS, name string, maxBytes int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > maxBytes {
		return nil, &os.PathError{Op: "read", Path: name, Err: ErrTooLarge}
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, err
	}
	return b[:n], nil
}

// ErrTooLarge is returned by ReadFile for a file above its size limit.
var ErrTooLarge = errors.New("vfs: file too large")

// WriteFileAtomic replaces name with data: it writes name+".tmp", optionally
// syncs it, renames it over name and, if sync is set, syncs the directory.
// After a crash name holds either the old or the new contents, provided sync
// was set; without sync it may hold either, or (on some filesystems) an empty
// or partial file, so readers must validate it.
func WriteFileAtomic(fsys FS, name string, data []byte, sync bool) error {
	tmp := name + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return err
	}
	if sync {
		return fsys.SyncDir(filepath.Dir(name))
	}
	return nil
}

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &osFile{f: f, end: st.Size()}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f, readOnly: true}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile wraps *os.File so that Write always appends at the file's end with
// pwrite (no shared seek position, so ReadAt from other goroutines is safe).
type osFile struct {
	f        *os.File
	readOnly bool
	mu       sync.Mutex // guards end
	end      int64
}

func (f *osFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

func (f *osFile) Write(p []byte) (int, error) {
	if f.readOnly {
		return 0, &os.PathError{Op: "write", Path: f.f.Name(), Err: os.ErrPermission}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.f.WriteAt(p, f.end)
	f.end += int64(n)
	return n, err
}

func (f *osFile) WriteAt(p []byte, off int64) (int, error) {
	if f.readOnly {
		return 0, &os.PathError{Op: "write", Path: f.f.Name(), Err: os.ErrPermission}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.f.WriteAt(p, off)
	if e := off + int64(n); e > f.end {
		f.end = e
	}
	return n, err
}

func (f *osFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	f.end = size
	return nil
}

func (f *osFile) Size() (int64, error) {
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (f *osFile) Sync() error      { return f.f.Sync() }
func (f *osFile) Close() error     { return f.f.Close() }
func (f *osFile) OSFile() *os.File { return f.f }

// MkdirAllDurable creates dir and its missing parents, and syncs the
// parent of each directory it created, so the new names survive a crash.
func MkdirAllDurable(fsys FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		ok, err := Exists(fsys, d)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}
