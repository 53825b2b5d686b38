package vfs

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Op names an FS or File operation, for fault injection.
type Op uint8

// Operations seen by an Injector.
const (
	OpCreate Op = iota
	OpOpen      // Open and OpenReadWrite
	OpRemove    // Remove and RemoveAll
	OpRename
	OpMkdir
	OpList
	OpStat
	OpSyncDir
	OpRead // File.ReadAt
	OpWrite
	OpWriteAt
	OpSync
	OpTruncate
	OpSize
	OpClose
	OpSyncFS // FSSyncer.SyncFS; name is the directory given
)

var opNames = [...]string{"create", "open", "remove", "rename", "mkdir", "list", "stat",
	"syncdir", "read", "write", "writeat", "sync", "truncate", "size", "close", "syncfs"}

// String names the operation.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// ErrInjected is the error the helpers below inject.
var ErrInjected = errors.New("vfs: injected error")

// Injector decides, before each operation, whether it fails. It may also
// sleep to simulate a slow disk. name is the path the operation concerns.
type Injector interface {
	MaybeError(op Op, name string) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op, name string) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op, name string) error { return f(op, name) }

// Rule is a switchable Injector: while enabled, operations in Ops (all if
// empty) on names containing PathContains sleep Delay and then fail with Err.
// A nil Err means ErrInjected, except that a rule with a Delay and no Err
// only delays. Count limits how many times it fires (0 = no limit). Its
// methods are safe for concurrent use.
type Rule struct {
	Ops          []Op
	PathContains string
	Err          error
	Delay        time.Duration
	Count        int64

	disabled atomic.Bool
	fired    atomic.Int64
}

// Enable turns the rule on (rules start enabled).
func (r *Rule) Enable() { r.disabled.Store(false) }

// Disable turns the rule off.
func (r *Rule) Disable() { r.disabled.Store(true) }

// Fired is how many operations the rule has affected.
func (r *Rule) Fired() int64 { return r.fired.Load() }

// MaybeError implements Injector.
func (r *Rule) MaybeError(op Op, name string) error {
	if r.disabled.Load() || !strings.Contains(name, r.PathContains) {
		return nil
	}
	if len(r.Ops) > 0 {
		match := false
		for _, o := range r.Ops {
			match = match || o == op
		}
		if !match {
			return nil
		}
	}
	if n := r.fired.Add(1); r.Count > 0 && n > r.Count {
		r.fired.Add(-1)
		return nil
	}
	if r.Delay > 0 {
		time.Sleep(r.Delay)
	}
	if r.Err == nil && r.Delay > 0 {
		return nil // a pure delay rule
	}
	if r.Err == nil {
		return ErrInjected
	}
	return r.Err
}

// WithFaults wraps fsys so that every operation first asks inj. Files it
// returns do not expose OSFile, so reads cannot bypass the injector.
func WithFaults(fsys FS, inj Injector) FS {
	return &faultFS{fs: fsys, inj: inj}
}

type faultFS struct {
	fs  FS
	inj Injector
}

func (f *faultFS) check(op Op, name string) error {
	if err := f.inj.MaybeError(op, name); err != nil {
		return &os.PathError{Op: op.String(), Path: name, Err: err}
	}
	return nil
}

func (f *faultFS) wrap(name string, file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{f: file, fs: f, name: name}, nil
}

func (f *faultFS) Create(name string) (File, error) {
	if err := f.check(OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Create(name)
	return f.wrap(name, file, err)
}

func (f *faultFS) OpenReadWrite(name string) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.fs.OpenReadWrite(name)
	return f.wrap(name, file, err)
}

func (f *faultFS) Open(name string) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Open(name)
	return f.wrap(name, file, err)
}

func (f *faultFS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

func (f *faultFS) RemoveAll(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.fs.RemoveAll(name)
}

func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.check(OpRename, newname); err != nil {
		return err
	}
	return f.fs.Rename(oldname, newname)
}

func (f *faultFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.check(OpMkdir, dir); err != nil {
		return err
	}
	return f.fs.MkdirAll(dir, perm)
}

func (f *faultFS) List(dir string) ([]string, error) {
	if err := f.check(OpList, dir); err != nil {
		return nil, err
	}
	return f.fs.List(dir)
}

func (f *faultFS) Stat(name string) (os.FileInfo, error) {
	if err := f.check(OpStat, name); err != nil {
		return nil, err
	}
	return f.fs.Stat(name)
}

func (f *faultFS) SyncDir(dir string) error {
	if err := f.check(OpSyncDir, dir); err != nil {
		return err
	}
	return f.fs.SyncDir(dir)
}

type faultFile struct {
	f    File
	fs   *faultFS
	name string
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.f.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWriteAt, f.name); err != nil {
		return 0, err
	}
	return f.f.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *faultFile) Size() (int64, error) {
	if err := f.fs.check(OpSize, f.name); err != nil {
		return 0, err
	}
	return f.f.Size()
}

func (f *faultFile) Close() error {
	if err := f.fs.check(OpClose, f.name); err != nil {
		f.f.Close() // release the handle anyway
		return err
	}
	return f.f.Close()
}
