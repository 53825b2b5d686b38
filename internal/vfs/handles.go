package vfs

import (
	"container/list"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// WithHandleCache returns an FS whose files hold an operating-system
// descriptor only while one is needed: a File opened through it is a name
// plus, at most, one cached handle of the underlying FS. At most limit
// handles are kept open; opening another closes the least recently used
// idle one, and the next operation on that File opens its name again. So a
// broker holding 30,000 partitions holds descriptors for the files it is
// using, not for every segment and index it has (Kafka keeps them all open
// and asks operators to raise the limit; sluice bounds them instead).
//
// The limit is soft: handles in use by an operation in flight are never
// closed, so more may be open for a moment. When the underlying FS runs out
// of descriptors (EMFILE, ENFILE), every idle handle is closed and the open
// is retried once before the error is returned.
//
// Names are kept POSIX-true: removing or renaming over a name that a File
// still holds keeps that File's handle open (pinned) until it is closed, as
// an unlinked file stays readable through an open descriptor. Renaming a
// name moves its Files with it.
//
// Closing an idle handle with unsynced writes is safe on Linux 4.16 and
// later: the next fsync through a new descriptor reports a writeback error
// that nobody has seen yet.
func WithHandleCache(fsys FS, limit int) *HandleCache {
	if limit < 1 {
		limit = 1
	}
	return &HandleCache{FS: fsys, limit: limit, byName: map[string]map[*lazyFile]struct{}{}}
}

// HandleCache is the FS returned by WithHandleCache. Its methods are safe
// for concurrent use.
type HandleCache struct {
	FS
	limit int

	mu     sync.Mutex
	open   int       // handles open: idle, in use and pinned
	idle   list.List // *lazyFile with an idle, evictable handle; oldest first
	byName map[string]map[*lazyFile]struct{}

	opens     atomic.Int64
	evictions atomic.Int64
}

// HandleStats describes a HandleCache.
type HandleStats struct {
	Limit     int   // the soft limit on open handles
	Open      int   // handles open now
	Opens     int64 // handles opened since the cache was made
	Evictions int64 // idle handles closed to stay under the limit
}

// Stats returns the cache's counters.
func (c *HandleCache) Stats() HandleStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return HandleStats{Limit: c.limit, Open: c.open, Opens: c.opens.Load(), Evictions: c.evictions.Load()}
}

type openMode int

const (
	modeCreate openMode = iota
	modeReadWrite
	modeRead
)

// lazyFile is a File of a HandleCache. Its fields are guarded by c.mu.
type lazyFile struct {
	c *HandleCache

	name   string
	mode   openMode // how to reopen: modeReadWrite or modeRead
	f      File     // nil while closed
	refs   int      // operations in flight on f
	elem   *list.Element
	pinned bool // the name was removed or replaced: f is the only way in
	closed bool
}

// Create creates name (truncating it) and returns a cached File.
func (c *HandleCache) Create(name string) (File, error) { return c.openNew(name, modeCreate) }

// OpenReadWrite opens name read-write, creating it if missing.
func (c *HandleCache) OpenReadWrite(name string) (File, error) {
	return c.openNew(name, modeReadWrite)
}

// Open opens name read-only.
func (c *HandleCache) Open(name string) (File, error) { return c.openNew(name, modeRead) }

func (c *HandleCache) openNew(name string, mode openMode) (File, error) {
	name = filepath.Clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.openLocked(name, mode)
	if err != nil {
		return nil, err
	}
	if mode == modeCreate {
		mode = modeReadWrite
	}
	lf := &lazyFile{c: c, name: name, mode: mode, f: f}
	set := c.byName[name]
	if set == nil {
		set = map[*lazyFile]struct{}{}
		c.byName[name] = set
	}
	set[lf] = struct{}{}
	lf.elem = c.idle.PushBack(lf)
	c.trimLocked()
	return lf, nil
}

// openLocked opens name in the underlying FS after making room, retrying
// once with every idle handle closed if descriptors ran out. Opening under
// mu keeps a concurrent Rename or Remove from changing what name means
// meanwhile.
func (c *HandleCache) openLocked(name string, mode openMode) (File, error) {
	c.makeRoomLocked(c.limit - 1)
	f, err := c.openRaw(name, mode)
	if err != nil && IsOutOfDescriptors(err) {
		c.makeRoomLocked(0)
		f, err = c.openRaw(name, mode)
	}
	if err != nil {
		return nil, err
	}
	c.opens.Add(1)
	c.open++
	return f, nil
}

func (c *HandleCache) openRaw(name string, mode openMode) (File, error) {
	switch mode {
	case modeCreate:
		return c.FS.Create(name)
	case modeRead:
		return c.FS.Open(name)
	default:
		return c.FS.OpenReadWrite(name)
	}
}

// IsOutOfDescriptors reports whether err says the process or the system
// has no file descriptor left (EMFILE, ENFILE).
func IsOutOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// makeRoomLocked closes idle handles, oldest first, until at most keep
// handles are open or none is idle.
func (c *HandleCache) makeRoomLocked(keep int) {
	for c.open > keep {
		e := c.idle.Front()
		if e == nil {
			return
		}
		lf := e.Value.(*lazyFile)
		c.idle.Remove(e)
		lf.elem = nil
		lf.f.Close()
		lf.f = nil
		c.open--
		c.evictions.Add(1)
	}
}

func (c *HandleCache) trimLocked() { c.makeRoomLocked(c.limit) }

// acquire returns lf's handle, opening the name again if it was closed;
// release must follow.
func (lf *lazyFile) acquire() (File, error) {
	c := lf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if lf.closed {
		return nil, os.ErrClosed
	}
	if lf.f == nil {
		f, err := c.openLocked(lf.name, lf.mode)
		if err != nil {
			return nil, err
		}
		lf.f = f
	}
	lf.refs++
	if lf.elem != nil {
		c.idle.Remove(lf.elem)
		lf.elem = nil
	}
	return lf.f, nil
}

func (lf *lazyFile) release() {
	c := lf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	lf.refs--
	if lf.refs > 0 || lf.f == nil {
		return
	}
	if lf.closed {
		lf.f.Close()
		lf.f = nil
		c.open--
		return
	}
	if !lf.pinned {
		lf.elem = c.idle.PushBack(lf)
	}
	c.trimLocked()
}

func (lf *lazyFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := lf.acquire()
	if err != nil {
		return 0, err
	}
	defer lf.release()
	return f.ReadAt(p, off)
}

func (lf *lazyFile) Write(p []byte) (int, error) {
	f, err := lf.acquire()
	if err != nil {
		return 0, err
	}
	defer lf.release()
	return f.Write(p)
}

func (lf *lazyFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := lf.acquire()
	if err != nil {
		return 0, err
	}
	defer lf.release()
	return f.WriteAt(p, off)
}

func (lf *lazyFile) Sync() error {
	f, err := lf.acquire()
	if err != nil {
		return err
	}
	defer lf.release()
	return f.Sync()
}

func (lf *lazyFile) Truncate(size int64) error {
	f, err := lf.acquire()
	if err != nil {
		return err
	}
	defer lf.release()
	return f.Truncate(size)
}

func (lf *lazyFile) Size() (int64, error) {
	f, err := lf.acquire()
	if err != nil {
		return 0, err
	}
	defer lf.release()
	return f.Size()
}

// PinOS implements OSPinner (for sendfile).
func (lf *lazyFile) PinOS() (f *os.File, release func(), err error) {
	h, err := lf.acquire()
	if err != nil {
		return nil, nil, err
	}
	of, ok := h.(OSFiler)
	if !ok {
		lf.release()
		return nil, nil, nil
	}
	return of.OSFile(), lf.release, nil
}

func (lf *lazyFile) Close() error {
	c := lf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if lf.closed {
		return os.ErrClosed
	}
	lf.closed = true
	c.forgetLocked(lf)
	if lf.elem != nil {
		c.idle.Remove(lf.elem)
		lf.elem = nil
	}
	if lf.f == nil || lf.refs > 0 {
		return nil // the last release closes it
	}
	err := lf.f.Close()
	lf.f = nil
	c.open--
	return err
}

func (c *HandleCache) forgetLocked(lf *lazyFile) {
	if set := c.byName[lf.name]; set != nil {
		delete(set, lf)
		if len(set) == 0 {
			delete(c.byName, lf.name)
		}
	}
}

// pinLocked keeps every File open under name on its current handle (the
// name is about to stop leading to that file). A File whose handle cannot
// be opened again loses its way in: its later operations fail.
func (c *HandleCache) pinLocked(name string) {
	for lf := range c.byName[name] {
		delete(c.byName[name], lf)
		if lf.f == nil {
			f, err := c.openLocked(lf.name, lf.mode)
			if err != nil {
				lf.closed = true // nothing to reopen: fail later operations
				continue
			}
			lf.f = f
		}
		if lf.elem != nil {
			c.idle.Remove(lf.elem)
			lf.elem = nil
		}
		lf.pinned = true
	}
	delete(c.byName, name)
}

// Remove removes name; Files open under it keep reading and writing the
// removed file.
func (c *HandleCache) Remove(name string) error {
	name = filepath.Clean(name)
	c.mu.Lock()
	c.pinLocked(name)
	c.mu.Unlock()
	return c.FS.Remove(name)
}

// RemoveAll removes name and everything below it; Files open there keep
// their files.
func (c *HandleCache) RemoveAll(name string) error {
	name = filepath.Clean(name)
	prefix := name + string(filepath.Separator)
	c.mu.Lock()
	for n := range c.byName {
		if n == name || strings.HasPrefix(n, prefix) {
			c.pinLocked(n)
		}
	}
	c.mu.Unlock()
	return c.FS.RemoveAll(name)
}

// Rename renames oldname to newname: Files open under oldname follow it,
// and Files open under a replaced newname keep the replaced file.
func (c *HandleCache) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	c.mu.Lock()
	defer c.mu.Unlock()
	if oldname == newname {
		return c.FS.Rename(oldname, newname)
	}
	c.pinLocked(newname)
	if err := c.FS.Rename(oldname, newname); err != nil {
		return err
	}
	if set := c.byName[oldname]; set != nil {
		delete(c.byName, oldname)
		for lf := range set {
			lf.name = newname
		}
		c.byName[newname] = set
	}
	return nil
}
