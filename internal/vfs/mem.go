package vfs

import (
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory FS that remembers what is durable, so Crash can
// produce the state a power loss could leave behind. It is safe for
// concurrent use. Relative and absolute names share one root ("a/b" and
// "/a/b" are the same file).
//
// What is modeled (and nothing more):
//
//   - File contents. Each file keeps its durable contents (as of its last
//     Sync) and the ordered list of writes and truncations since. A crash
//     keeps the durable contents, then applies a random prefix of that list;
//     the first write not applied in full may be torn at a random byte, and
//     sometimes the file is then extended with zeros up to where that write
//     would have ended (size metadata persisted before the data). Writes are
//     thus persisted in order; reordering of unsynced pages is not modeled.
//   - Names. Creating, removing and renaming entries (files and directories)
//     changes the live namespace at once and is logged. SyncDir(d) makes the
//     logged changes touching d durable. A crash keeps the durable
//     namespace, then applies a random prefix of the changes not yet synced.
//     A rename is one change (it is atomic), durable when either its source
//     or its target directory is synced.
//
// Open handles keep working on the Mem they came from; Crash returns a new,
// independent Mem and leaves the receiver unchanged.
type Mem struct {
	mu      sync.RWMutex
	root    *memNode
	pending []nsOp // namespace changes not yet made durable, in order
}

type memNode struct {
	dir bool
	// directories
	children        map[string]*memNode // live entries
	durableChildren map[string]*memNode // entries as of the last SyncDir
	// files
	data    []byte
	durable []byte   // contents as of the last Sync
	ops     []fileOp // unsynced changes since, in order
}

// fileOp is a write of data at off, or (trunc) a truncation to off.
type fileOp struct {
	trunc bool
	off   int64
	data  []byte
}

// nsOp is a namespace change: link node at (dstDir, dst) and/or unlink
// (srcDir, src). Create is a link, Remove an unlink, Rename both.
type nsOp struct {
	srcDir *memNode
	src    string
	dstDir *memNode
	dst    string
	node   *memNode
}

// NewMem returns an empty in-memory filesystem.
func NewMem() *Mem {
	return &Mem{root: newDir()}
}

func newDir() *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, durableChildren: map[string]*memNode{}}
}

func splitPath(name string) []string {
	c := filepath.ToSlash(filepath.Clean(name))
	c = strings.Trim(c, "/")
	if c == "" || c == "." {
		return nil
	}
	return strings.Split(c, "/")
}

// lookupDir returns the directory holding the last element of name, and that
// element. It fails if a parent is missing or not a directory.
func (m *Mem) lookupParent(op, name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", &os.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	d := m.root
	for _, p := range parts[:len(parts)-1] {
		c, ok := d.children[p]
		if !ok {
			return nil, "", &os.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		if !c.dir {
			return nil, "", &os.PathError{Op: op, Path: name, Err: errNotDir}
		}
		d = c
	}
	return d, parts[len(parts)-1], nil
}

func (m *Mem) lookup(op, name string) (*memNode, error) {
	if len(splitPath(name)) == 0 {
		return m.root, nil
	}
	d, base, err := m.lookupParent(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := d.children[base]
	if !ok {
		return nil, &os.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

type vfsError string

func (e vfsError) Error() string { return string(e) }

const (
	errNotDir   = vfsError("not a directory")
	errIsDir    = vfsError("is a directory")
	errNotEmpty = vfsError("directory not empty")
	errClosed   = vfsError("file already closed")
)

func (m *Mem) link(d *memNode, name string, n *memNode) {
	d.children[name] = n
	m.pending = append(m.pending, nsOp{dstDir: d, dst: name, node: n})
}

func (m *Mem) unlink(d *memNode, name string) {
	delete(d.children, name)
	m.pending = append(m.pending, nsOp{srcDir: d, src: name})
}

func (m *Mem) open(name string, create, trunc, readOnly bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupParent("open", name)
	if err != nil {
		return nil, err
	}
	n, ok := d.children[base]
	switch {
	case ok && n.dir:
		return nil, &os.PathError{Op: "open", Path: name, Err: errIsDir}
	case !ok && !create:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		n = &memNode{}
		m.link(d, base, n)
	case trunc:
		n.truncate(0)
	}
	return &memFile{m: m, n: n, name: name, readOnly: readOnly}, nil
}

// Create implements FS.
func (m *Mem) Create(name string) (File, error) { return m.open(name, true, true, false) }

// OpenReadWrite implements FS.
func (m *Mem) OpenReadWrite(name string) (File, error) { return m.open(name, true, false, false) }

// Open implements FS.
func (m *Mem) Open(name string) (File, error) { return m.open(name, false, false, true) }

// Remove implements FS.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupParent("remove", name)
	if err != nil {
		return err
	}
	n, ok := d.children[base]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &os.PathError{Op: "remove", Path: name, Err: errNotEmpty}
	}
	m.unlink(d, base)
	return nil
}

// RemoveAll implements FS.
func (m *Mem) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupParent("removeall", name)
	if err != nil {
		return nil // a missing parent means nothing to remove
	}
	if _, ok := d.children[base]; ok {
		m.unlink(d, base)
	}
	return nil
}

// Rename implements FS.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sd, sb, err := m.lookupParent("rename", oldname)
	if err != nil {
		return err
	}
	n, ok := sd.children[sb]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	dd, db, err := m.lookupParent("rename", newname)
	if err != nil {
		return err
	}
	if old, ok := dd.children[db]; ok && old.dir {
		return &os.PathError{Op: "rename", Path: newname, Err: errIsDir}
	}
	if sd == dd && sb == db {
		return nil
	}
	delete(sd.children, sb)
	dd.children[db] = n
	m.pending = append(m.pending, nsOp{srcDir: sd, src: sb, dstDir: dd, dst: db, node: n})
	return nil
}

// MkdirAll implements FS.
func (m *Mem) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.root
	for _, p := range splitPath(dir) {
		c, ok := d.children[p]
		if !ok {
			c = newDir()
			m.link(d, p, c)
		} else if !c.dir {
			return &os.PathError{Op: "mkdir", Path: dir, Err: errNotDir}
		}
		d = c
	}
	return nil
}

// List implements FS.
func (m *Mem) List(dir string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup("list", dir)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &os.PathError{Op: "list", Path: dir, Err: errNotDir}
	}
	names := make([]string, 0, len(n.children))
	for k := range n.children {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (m *Mem) Stat(name string) (os.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return memInfo{name: filepath.Base(name), size: int64(len(n.data)), dir: n.dir}, nil
}

// SyncDir implements FS: the pending namespace changes touching dir become
// durable.
func (m *Mem) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.lookup("syncdir", dir)
	if err != nil {
		return err
	}
	if !d.dir {
		return &os.PathError{Op: "syncdir", Path: dir, Err: errNotDir}
	}
	rest := m.pending[:0]
	for _, op := range m.pending {
		if op.srcDir == d || op.dstDir == d {
			op.apply(func(n *memNode) map[string]*memNode { return n.durableChildren })
		} else {
			rest = append(rest, op)
		}
	}
	clear(m.pending[len(rest):])
	m.pending = rest
	return nil
}

func (op nsOp) apply(children func(*memNode) map[string]*memNode) {
	if op.srcDir != nil {
		delete(children(op.srcDir), op.src)
	}
	if op.dstDir != nil {
		children(op.dstDir)[op.dst] = op.node
	}
}

// Crash returns the filesystem as a power loss at this moment could leave
// it, choosing among the possible states with rng (see the Mem doc comment).
// The result has nothing pending: everything in it is durable.
func (m *Mem) Crash(rng *rand.Rand) *Mem {
	m.mu.RLock()
	defer m.mu.RUnlock()
	// Directory entries after the crash: durable ones plus a prefix of the
	// pending changes.
	dirs := map[*memNode]map[string]*memNode{}
	children := func(d *memNode) map[string]*memNode {
		c, ok := dirs[d]
		if !ok {
			c = make(map[string]*memNode, len(d.durableChildren))
			for k, v := range d.durableChildren {
				c[k] = v
			}
			dirs[d] = c
		}
		return c
	}
	k := rng.Intn(len(m.pending) + 1)
	for _, op := range m.pending[:k] {
		op.apply(children)
	}
	copies := map[*memNode]*memNode{}
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c, ok := copies[n]; ok {
			return c
		}
		var c *memNode
		if n.dir {
			c = newDir()
			copies[n] = c
			names := make([]string, 0)
			for name := range children(n) {
				names = append(names, name)
			}
			sort.Strings(names) // deterministic rng use
			for _, name := range names {
				cc := clone(children(n)[name])
				c.children[name] = cc
				c.durableChildren[name] = cc
			}
		} else {
			data := n.crashData(rng)
			c = &memNode{data: data, durable: append([]byte(nil), data...)}
			copies[n] = c
		}
		return c
	}
	return &Mem{root: clone(m.root)}
}

// crashData is the file's contents after a crash: durable contents plus a
// random prefix of the unsynced operations, the next write possibly torn.
func (n *memNode) crashData(rng *rand.Rand) []byte {
	data := append([]byte(nil), n.durable...)
	k := rng.Intn(len(n.ops) + 1)
	for _, op := range n.ops[:k] {
		data = applyOp(data, op)
	}
	if k < len(n.ops) && !n.ops[k].trunc {
		op := n.ops[k]
		cut := rng.Intn(len(op.data) + 1)
		data = applyOp(data, fileOp{off: op.off, data: op.data[:cut]})
		if end := op.off + int64(len(op.data)); rng.Intn(4) == 0 && end > int64(len(data)) {
			data = append(data, make([]byte, end-int64(len(data)))...)
		}
	}
	return data
}

func applyOp(data []byte, op fileOp) []byte {
	if op.trunc {
		if op.off <= int64(len(data)) {
			return data[:op.off]
		}
		return append(data, make([]byte, op.off-int64(len(data)))...)
	}
	end := op.off + int64(len(op.data))
	if end > int64(len(data)) {
		if op.off > int64(len(data)) {
			data = append(data, make([]byte, op.off-int64(len(data)))...)
		}
		data = append(data[:op.off], op.data...)
		return data
	}
	copy(data[op.off:], op.data)
	return data
}

func (n *memNode) write(p []byte, off int64) {
	n.data = applyOp(n.data, fileOp{off: off, data: p})
	if k := len(n.ops); k > 0 {
		last := &n.ops[k-1]
		if !last.trunc && last.off+int64(len(last.data)) == off {
			last.data = append(last.data, p...) // coalesce appends
			return
		}
	}
	n.ops = append(n.ops, fileOp{off: off, data: append([]byte(nil), p...)})
}

func (n *memNode) truncate(size int64) {
	n.data = applyOp(n.data, fileOp{trunc: true, off: size})
	n.ops = append(n.ops, fileOp{trunc: true, off: size})
}

func (n *memNode) sync() {
	for _, op := range n.ops {
		n.durable = applyOp(n.durable, op)
	}
	n.ops = nil
}

type memFile struct {
	m        *Mem
	n        *memNode
	name     string
	readOnly bool
	closed   bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.RLock()
	defer f.m.mu.RUnlock()
	if f.closed {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: errClosed}
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) writable(op string) error {
	if f.closed {
		return &os.PathError{Op: op, Path: f.name, Err: errClosed}
	}
	if f.readOnly {
		return &os.PathError{Op: op, Path: f.name, Err: fs.ErrPermission}
	}
	return nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.writable("write"); err != nil {
		return 0, err
	}
	f.n.write(p, int64(len(f.n.data)))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.writable("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.write(p, off)
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.writable("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.truncate(size)
	return nil
}

func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "sync", Path: f.name, Err: errClosed}
	}
	f.n.sync()
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.m.mu.RLock()
	defer f.m.mu.RUnlock()
	if f.closed {
		return 0, &os.PathError{Op: "stat", Path: f.name, Err: errClosed}
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: errClosed}
	}
	f.closed = true
	return nil
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
