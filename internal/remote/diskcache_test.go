package remote_test

import (
	"context"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/vfs"
)

// countingStore counts the Gets of index objects (.index, .timeindex,
// .txnindex).
type countingStore struct {
	objstore.Store
	indexGets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if strings.HasSuffix(key, ".index") || strings.HasSuffix(key, ".timeindex") || strings.HasSuffix(key, ".txnindex") {
		c.indexGets.Add(1)
	}
	return c.Store.Get(ctx, key, off, n)
}

// readAll reads every offset of the remote log, and looks up a timestamp
// and the aborted transactions in each remote segment (every index kind).
func readAll(t *testing.T, rd *remote.Reader, tl *tiered) {
	t.Helper()
	lineage := tl.log.EpochEntries()
	local := tl.log.LocalLogStartOffset()
	for off := int64(0); off < local; off += 7 {
		if _, err := rd.Read(context.Background(), part, lineage, off, 3000, 1<<62, true); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rd.AbortedTxns(context.Background(), part, lineage, off, off+5, local); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range tl.segs {
		if _, _, _, err := rd.OffsetForTimestamp(context.Background(), part, lineage, s.MaxTimestamp, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func dirSize(t *testing.T, dir string) (int64, []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	var names []string
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
		names = append(names, e.Name())
	}
	return size, names
}

// TestIndexCacheOnDisk: the remote indexes (offset, time, transaction) are
// cached as files in remote-log-index-cache (Kafka's RemoteIndexCache): a
// reader started again on the same directory (a broker restart) reads
// none of them from the object store; a temporary file a crash left and
// unknown files are deleted at start; and the files stay within
// remote.log.index.file.cache.total.size.bytes.
func TestIndexCacheOnDisk(t *testing.T) {
	tl := txnLog(t, 300)
	tl.tier(t, tl.log.LogEndOffset()/2)
	store := &countingStore{Store: tl.store}
	dir := filepath.Join(t.TempDir(), remote.IndexCacheDirName)
	cfg := remote.ReaderConfig{IndexCacheDir: dir, FS: vfs.Default}

	rd := remote.NewReader(store, tl.meta, cfg)
	if err := rd.IndexCacheErr(); err != nil {
		t.Fatal(err)
	}
	readAll(t, rd, tl)
	first := store.indexGets.Load()
	files, bytes, _, writes := rd.DiskCacheStats()
	if first == 0 || files == 0 || writes == 0 {
		t.Fatalf("first reader: %d index GETs, %d files cached (%d bytes), %d written", first, files, bytes, writes)
	}
	if size, _ := dirSize(t, dir); size != bytes {
		t.Fatalf("directory holds %d bytes, the cache counts %d", size, bytes)
	}

	// A crash's leftovers and a stranger.
	for _, junk := range []string{"00000000000000000000_00112233445566778899aabbccddeeff.index.abc.tmp", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, junk), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Restart: a new reader on the same directory.
	rd2 := remote.NewReader(store, tl.meta, cfg)
	if err := rd2.IndexCacheErr(); err != nil {
		t.Fatal(err)
	}
	if n, _, _, _ := rd2.DiskCacheStats(); n != files {
		t.Fatalf("after the restart the cache holds %d files, %d before", n, files)
	}
	_, names := dirSize(t, dir)
	for _, n := range names {
		if strings.HasSuffix(n, ".tmp") || n == "notes.txt" {
			t.Fatalf("%s not deleted at start", n)
		}
	}
	readAll(t, rd2, tl)
	if got := store.indexGets.Load() - first; got != 0 {
		t.Fatalf("after the restart %d index objects were read from the store, want 0", got)
	}
	if _, _, reads, _ := rd2.DiskCacheStats(); reads == 0 {
		t.Fatal("no index read from the disk cache after the restart")
	}

	// A deleted segment's files go (Kafka's RemoteIndexCache.remove).
	id := hex.EncodeToString(tl.segs[0].ID[:])
	has := func() bool {
		_, names := dirSize(t, dir)
		for _, n := range names {
			if strings.Contains(n, id) {
				return true
			}
		}
		return false
	}
	if !has() {
		t.Fatalf("no index file of segment %s", id)
	}
	rd2.Forget(tl.segs[0].ID)
	if has() {
		t.Fatalf("index files of the forgotten segment %s remain", id)
	}

	// A bound of a few files: the directory stays within it, at start
	// (the files over it deleted) and while reading.
	const bound = 300
	small := cfg
	small.IndexCacheBytes = bound
	rd3 := remote.NewReader(store, tl.meta, small)
	if size, _ := dirSize(t, dir); size > bound {
		t.Fatalf("%d bytes in the directory after a start with a bound of %d", size, bound)
	}
	readAll(t, rd3, tl)
	if size, names := dirSize(t, dir); size > bound || len(names) == 0 {
		t.Fatalf("%d bytes in %d files with a bound of %d", size, len(names), bound)
	}
}
