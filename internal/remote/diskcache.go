package remote

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/internal/vfs"
)

// IndexCacheDirName is the directory, in the first log directory, that
// holds the remote indexes cached on disk (Kafka's RemoteIndexCache
// DIR_NAME).
const IndexCacheDirName = "remote-log-index-cache"

// diskIndexCache keeps the offset, time and transaction index objects of
// remote segments as files in one directory (Kafka's RemoteIndexCache),
// least recently used out first within a bound on their total size
// (remote.log.index.file.cache.total.size.bytes). A file is
// {start offset}_{segment id, hex}{suffix}: .index, .timeindex or
// .txnindex. It is written as a temporary file (…<suffix>.<random>.tmp),
// synced and renamed, so a crash leaves either the whole file or a
// temporary one, which the next start deletes along with any other file it
// does not know. The files survive a restart: the next start takes them
// back, oldest (by modification time) least recently used. Safe for
// concurrent use.
type diskIndexCache struct {
	fs    vfs.FS
	dir   string
	limit int64

	mu   sync.Mutex
	size int64
	ll   *list.List // of *diskEntry, most recent first
	m    map[indexKey]*list.Element
	// gets and puts count the files read and written.
	gets, puts int64
}

type diskEntry struct {
	key  indexKey
	name string
	size int64
}

// indexFileName is the name of seg's index file of kind.
func indexFileName(start int64, id [16]byte, kind FileKind) string {
	return fmt.Sprintf("%020d_%s%s", start, hex.EncodeToString(id[:]), kind.Suffix())
}

// parseIndexFileName parses an indexFileName.
func parseIndexFileName(name string) (indexKey, bool) {
	for _, kind := range []FileKind{FileOffsetIndex, FileTimeIndex, FileTxnIndex} {
		base, ok := strings.CutSuffix(name, kind.Suffix())
		if !ok {
			continue
		}
		off, id, ok := strings.Cut(base, "_")
		if !ok || len(off) != 20 || len(id) != 32 {
			return indexKey{}, false
		}
		if _, err := strconv.ParseUint(off, 10, 63); err != nil {
			return indexKey{}, false
		}
		var k indexKey
		if _, err := hex.Decode(k.id[:], []byte(id)); err != nil {
			return indexKey{}, false
		}
		k.kind = kind
		return k, true
	}
	return indexKey{}, false
}

// openDiskIndexCache opens (creating it) the cache directory dir: it
// deletes temporary and unknown files, takes back the index files within
// limit (the oldest beyond it are deleted).
func openDiskIndexCache(fsys vfs.FS, dir string, limit int64) (*diskIndexCache, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	c := &diskIndexCache{fs: fsys, dir: dir, limit: limit, ll: list.New(), m: map[indexKey]*list.Element{}}
	type found struct {
		e     diskEntry
		mtime int64
	}
	var keep []found
	removed := false
	for _, name := range names {
		p := path.Join(dir, name)
		st, err := fsys.Stat(p)
		if err != nil {
			continue
		}
		k, ok := parseIndexFileName(name)
		if !ok || st.IsDir() {
			if err := fsys.RemoveAll(p); err != nil {
				return nil, err
			}
			removed = true
			continue
		}
		keep = append(keep, found{diskEntry{key: k, name: name, size: st.Size()}, st.ModTime().UnixNano()})
	}
	// Oldest first: each is pushed to the front, the newest ends there.
	slices.SortStableFunc(keep, func(a, b found) int {
		switch {
		case a.mtime < b.mtime:
			return -1
		case a.mtime > b.mtime:
			return 1
		}
		return strings.Compare(a.e.name, b.e.name)
	})
	for _, f := range keep {
		e := f.e
		c.m[e.key] = c.ll.PushFront(&e)
		c.size += e.size
	}
	if c.evictLocked() > 0 {
		removed = true
	}
	if removed {
		if err := fsys.SyncDir(dir); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// evictLocked deletes the least recently used files until the total is
// within the bound, returning how many it deleted (c.mu held).
func (c *diskIndexCache) evictLocked() int {
	n := 0
	for c.size > c.limit && c.ll.Len() > 0 {
		el := c.ll.Back()
		e := el.Value.(*diskEntry)
		c.ll.Remove(el)
		delete(c.m, e.key)
		c.size -= e.size
		c.fs.Remove(path.Join(c.dir, e.name))
		n++
	}
	return n
}

// get returns the bytes of key's file, marking it most recently used. A
// file that cannot be read is forgotten (and deleted).
func (c *diskIndexCache) get(key indexKey) ([]byte, bool) {
	c.mu.Lock()
	el, ok := c.m[key]
	var e diskEntry
	if ok {
		c.ll.MoveToFront(el)
		e = *el.Value.(*diskEntry)
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	b, err := c.read(e)
	if err != nil {
		c.drop(key)
		return nil, false
	}
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return b, true
}

func (c *diskIndexCache) read(e diskEntry) ([]byte, error) {
	f, err := c.fs.Open(path.Join(c.dir, e.name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, e.size)
	if _, err := f.ReadAt(b, 0); err != nil && !(err == io.EOF && e.size == 0) {
		return nil, err
	}
	return b, nil
}

// drop forgets key and deletes its file.
func (c *diskIndexCache) drop(key indexKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		e := el.Value.(*diskEntry)
		c.ll.Remove(el)
		delete(c.m, key)
		c.size -= e.size
		c.fs.Remove(path.Join(c.dir, e.name))
	}
}

// put writes key's file (seg's index of its kind) with b, unless b alone
// is over the bound, and deletes the least recently used files beyond it.
// A failure to write leaves the cache as it was (the index is read from
// the object store next time).
func (c *diskIndexCache) put(start int64, key indexKey, b []byte) {
	if int64(len(b)) > c.limit {
		return
	}
	name := indexFileName(start, key.id, key.kind)
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := path.Join(c.dir, name+"."+hex.EncodeToString(rnd[:])+".tmp")
	if err := c.write(tmp, b); err != nil {
		c.fs.Remove(tmp)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fs.Rename(tmp, path.Join(c.dir, name)); err != nil {
		c.fs.Remove(tmp)
		return
	}
	if el, ok := c.m[key]; ok {
		c.size -= el.Value.(*diskEntry).size
		c.ll.Remove(el)
	}
	c.m[key] = c.ll.PushFront(&diskEntry{key: key, name: name, size: int64(len(b))})
	c.size += int64(len(b))
	c.puts++
	c.evictLocked()
}

func (c *diskIndexCache) write(name string, b []byte) error {
	f, err := c.fs.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stats returns the files held, their total size, and the files read and
// written so far.
func (c *diskIndexCache) stats() (n int, size, gets, puts int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.size, c.gets, c.puts
}
