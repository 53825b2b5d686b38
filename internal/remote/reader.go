package remote

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

// ErrNoSegment is returned for an offset no readable remote segment of the
// partition's lineage holds (Kafka's RemoteLogManager.read throws
// OffsetOutOfRangeException: OFFSET_OUT_OF_RANGE).
var ErrNoSegment = errors.New("remote: no remote segment holds the offset")

// ErrStorage wraps every failure to read the object store or to make sense
// of what it returned (Kafka's RemoteStorageException, which a fetch
// answers with UNKNOWN_SERVER_ERROR: Errors.forException of an exception
// that is not an ApiException).
var ErrStorage = errors.New("remote: remote storage read failed")

// ReaderConfig bounds a Reader's caches.
type ReaderConfig struct {
	// Prefix is the object key prefix (sluice.remote.storage.prefix).
	Prefix string
	// IndexCacheBytes bounds the parsed offset, time and transaction
	// indexes held in memory, and their files in IndexCacheDir
	// (remote.log.index.file.cache.total.size.bytes, Kafka's
	// RemoteIndexCache). Default 1 GiB.
	IndexCacheBytes int64
	// IndexCacheDir, if set, is the directory the index objects are
	// cached in on disk (IndexCacheDirName in the log directory), kept
	// across restarts, through FS (default vfs.Default).
	IndexCacheDir string
	FS            vfs.FS
	// ChunkBytes is the size of the ranges of log objects fetched and
	// cached; ChunkCacheBytes bounds the chunks held. Defaults 1 MiB and
	// 64 MiB.
	ChunkBytes      int64
	ChunkCacheBytes int64
}

// indexKey names one parsed index of one remote segment.
type indexKey struct {
	id   [16]byte
	kind FileKind
}

// chunkKey names one chunk of a remote segment's log object.
type chunkKey struct {
	id [16]byte
	n  int64
}

// Reader reads a partition's remote log: the segment holding an offset,
// its batches through the remote offset index, the aborted transactions
// from the remote transaction indexes, and timestamp lookups through the
// remote time index (Kafka's RemoteLogManager.read and RemoteLogReader,
// with RemoteIndexCache). It is safe for concurrent use; every method
// runs on the caller's goroutine (the caller bounds concurrency, Kafka's
// remote.log.reader.threads).
type Reader struct {
	store  objstore.Store
	meta   Metadata
	cfg    ReaderConfig
	index  *lru[indexKey, any]
	chunks *lru[chunkKey, []byte]
	// disk is the on-disk index cache (nil without IndexCacheDir, or if
	// it could not be opened: diskErr).
	disk    *diskIndexCache
	diskErr error
}

// NewReader returns a reader of the segments meta lists, whose objects
// live in store.
func NewReader(store objstore.Store, meta Metadata, cfg ReaderConfig) *Reader {
	if cfg.IndexCacheBytes <= 0 {
		cfg.IndexCacheBytes = 1 << 30
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = 1 << 20
	}
	if cfg.ChunkCacheBytes <= 0 {
		cfg.ChunkCacheBytes = 64 << 20
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	r := &Reader{store: store, meta: meta, cfg: cfg,
		index: newLRU[indexKey, any](cfg.IndexCacheBytes), chunks: newLRU[chunkKey, []byte](cfg.ChunkCacheBytes)}
	if cfg.IndexCacheDir != "" {
		r.disk, r.diskErr = openDiskIndexCache(cfg.FS, cfg.IndexCacheDir, cfg.IndexCacheBytes)
	}
	return r
}

// Forget drops what the caches hold of the remote segment id, its index
// files on disk included: the segment was deleted (Kafka's
// RemoteIndexCache.remove when RLMExpirationTask deletes a segment).
func (r *Reader) Forget(id [16]byte) {
	r.index.removeIf(func(k indexKey) bool { return k.id == id })
	r.chunks.removeIf(func(k chunkKey) bool { return k.id == id })
	if r.disk != nil {
		for _, kind := range []FileKind{FileOffsetIndex, FileTimeIndex, FileTxnIndex} {
			r.disk.drop(indexKey{id: id, kind: kind})
		}
	}
}

// IndexCacheErr is why the on-disk index cache could not be opened (the
// reader then caches indexes in memory only), nil if it was or none was
// asked for.
func (r *Reader) IndexCacheErr() error { return r.diskErr }

// DiskCacheStats reports the index files in the on-disk cache, their
// total size, and how many were read from and written to it.
func (r *Reader) DiskCacheStats() (files int, bytes, reads, writes int64) {
	if r.disk == nil {
		return 0, 0, 0, 0
	}
	return r.disk.stats()
}

// Metadata is the remote log metadata the reader looks segments up in.
func (r *Reader) Metadata() Metadata { return r.meta }

// CacheStats reports the entries and bytes held by the index and chunk
// caches.
func (r *Reader) CacheStats() (indexN int, indexBytes int64, chunkN int, chunkBytes int64) {
	indexN, indexBytes, _ = r.index.stats()
	chunkN, chunkBytes, _ = r.chunks.stats()
	return
}

// epochAt is the epoch of offset in entries (the last entry starting at or
// below it), or -1.
func epochAt(entries []epoch.Entry, offset int64) int32 {
	e := int32(-1)
	for _, en := range entries {
		if en.StartOffset > offset {
			break
		}
		e = en.Epoch
	}
	return e
}

// FindSegment returns the readable segment of p holding offset. When
// segments overlap (a new leader uploaded a range an old one had uploaded
// too), the one whose leader epoch for offset is the lineage's epoch for
// it wins (Kafka's RemoteLogManager.fetchRemoteLogSegmentMetadata asks
// for the segment of the epoch the leader-epoch cache gives the offset).
// With no epoch for offset in lineage (an empty lineage) the covering
// segment listed last is taken.
func (r *Reader) FindSegment(p Partition, lineage []epoch.Entry, offset int64) (Segment, bool) {
	return findSegment(r.meta.Segments(p), lineage, offset)
}

func findSegment(segs []Segment, lineage []epoch.Entry, offset int64) (Segment, bool) {
	want := epochAt(lineage, offset)
	var last *Segment
	for i := range segs {
		s := &segs[i]
		if !s.Covers(offset) {
			continue
		}
		if want >= 0 && epochAt(s.LeaderEpochs, offset) == want {
			return *s, true
		}
		last = s
	}
	if last != nil && want < 0 {
		return *last, true
	}
	return Segment{}, false
}

// HighestOffset is the highest offset held by p's readable remote segments,
// or -1 if there is none (ListOffsets -5, Kafka's
// UnifiedLog.highestOffsetInRemoteStorage).
func (r *Reader) HighestOffset(p Partition) int64 {
	hi := int64(-1)
	for _, s := range r.meta.Segments(p) {
		hi = max(hi, s.EndOffset)
	}
	return hi
}

// ReadResult is what Read returns: whole batches as stored, and the offset
// after the last one (the requested offset when there is none).
type ReadResult struct {
	Records    []byte
	NextOffset int64
	// Segment is the remote segment read.
	Segment Segment
}

// Read returns the batches of p's remote log starting with the batch that
// holds offset, as a local read does (storage.Log.Read): only batches
// whose base offset is below maxOffset, at most maxBytes in total, except
// that with first set the first batch is returned whole whatever its size
// (KIP-74; without it, a first batch over maxBytes gives nothing). As
// Kafka's RemoteLogManager.read it reads one segment: the one holding
// offset, or the next one if that segment has no batch at or after it.
// An offset no remote segment holds is ErrNoSegment; a failure of the
// store (a missing object included) is ErrStorage.
func (r *Reader) Read(ctx context.Context, p Partition, lineage []epoch.Entry, offset int64, maxBytes int, maxOffset int64, first bool) (ReadResult, error) {
	seg, ok := r.FindSegment(p, lineage, offset)
	if !ok {
		return ReadResult{}, fmt.Errorf("%w: %s-%d offset %d", ErrNoSegment, p.Topic, p.Partition, offset)
	}
	res := ReadResult{NextOffset: offset, Segment: seg}
	for hops := 0; ; hops++ {
		if offset >= maxOffset {
			return res, nil
		}
		start, ok, err := r.findBatch(ctx, &seg, offset)
		if err != nil {
			return ReadResult{}, err
		}
		if ok {
			res.Segment = seg
			data, next, err := r.take(ctx, &seg, start, int64(max(maxBytes, 0)), maxOffset, first)
			if err != nil {
				return ReadResult{}, err
			}
			if len(data) > 0 {
				res.Records, res.NextOffset = data, next
			}
			return res, nil
		}
		// No batch at or after offset here (the segment's end was
		// compacted away): on to the next segment, as Kafka's read does.
		if hops >= 16 {
			return res, nil
		}
		nseg, found := r.FindSegment(p, lineage, seg.EndOffset+1)
		if !found {
			return res, nil
		}
		seg, offset = nseg, seg.EndOffset+1
	}
}

// findBatch returns the position in seg's log object of the first batch
// whose last offset is at or after offset (ok false: none).
func (r *Reader) findBatch(ctx context.Context, seg *Segment, offset int64) (int64, bool, error) {
	pos := int64(0)
	if offset > seg.StartOffset {
		ix, err := r.offsetIndex(ctx, seg)
		if err != nil {
			return 0, false, err
		}
		pos = ix.Floor(uint32(offset - seg.StartOffset))
	}
	for {
		h, ok, err := r.header(ctx, seg, pos)
		if err != nil || !ok {
			return 0, false, err
		}
		if h.NextOffset() > offset {
			return pos, true, nil
		}
		pos += int64(h.Size())
	}
}

// take returns the batches from position start of seg's log object, within
// budget and below maxOffset, and the offset after the last.
func (r *Reader) take(ctx context.Context, seg *Segment, start, budget, maxOffset int64, first bool) ([]byte, int64, error) {
	end, next := start, int64(-1)
	for {
		h, ok, err := r.header(ctx, seg, end)
		if err != nil {
			return nil, 0, err
		}
		if !ok || h.BaseOffset >= maxOffset {
			break
		}
		if end+int64(h.Size())-start > budget && !(first && end == start) {
			break
		}
		end += int64(h.Size())
		next = h.NextOffset()
	}
	if end == start {
		return nil, 0, nil
	}
	data, err := r.readRange(ctx, seg, start, end-start)
	if err != nil {
		return nil, 0, err
	}
	return data, next, nil
}

// header parses the batch header at pos of seg's log object; ok is false
// at the end of the object (or of its whole batches).
func (r *Reader) header(ctx context.Context, seg *Segment, pos int64) (batch.Header, bool, error) {
	b, err := r.readRange(ctx, seg, pos, batch.HeaderSize)
	if err != nil {
		return batch.Header{}, false, err
	}
	if len(b) < batch.HeaderSize {
		return batch.Header{}, false, nil
	}
	h, err := batch.ParseHeader(b)
	if err != nil {
		return batch.Header{}, false, fmt.Errorf("%w: %s at %d: %v", ErrStorage, ObjectKey(r.cfg.Prefix, seg, FileLog), pos, err)
	}
	if seg.SizeBytes > 0 && pos+int64(h.Size()) > seg.SizeBytes {
		return batch.Header{}, false, nil // a torn tail: not a whole batch
	}
	return h, true, nil
}

// readRange returns up to n bytes of seg's log object from pos, through
// the chunk cache; fewer at the object's end.
func (r *Reader) readRange(ctx context.Context, seg *Segment, pos, n int64) ([]byte, error) {
	if seg.SizeBytes > 0 {
		n = min(n, seg.SizeBytes-pos)
	}
	if n <= 0 {
		return nil, nil
	}
	cb := r.cfg.ChunkBytes
	out := make([]byte, 0, n)
	for k := pos / cb; k*cb < pos+n; k++ {
		c, err := r.chunk(ctx, seg, k)
		if err != nil {
			return nil, err
		}
		lo := max(pos-k*cb, 0)
		hi := min(pos+n-k*cb, int64(len(c)))
		if lo >= hi {
			break
		}
		out = append(out, c[lo:hi]...)
		if int64(len(c)) < cb {
			break // the object's end
		}
	}
	return out, nil
}

// chunk returns chunk k of seg's log object, from the cache or the store.
func (r *Reader) chunk(ctx context.Context, seg *Segment, k int64) ([]byte, error) {
	key := chunkKey{id: seg.ID, n: k}
	if c, ok := r.chunks.get(key); ok {
		return c, nil
	}
	c, err := r.get(ctx, ObjectKey(r.cfg.Prefix, seg, FileLog), k*r.cfg.ChunkBytes, r.cfg.ChunkBytes)
	if err != nil {
		return nil, err
	}
	r.chunks.add(key, c, int64(len(c)))
	return c, nil
}

// get reads n bytes of an object from off (n < 0: to its end).
func (r *Reader) get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	rc, err := r.store.Get(ctx, key, off, n)
	if err != nil {
		return nil, fmt.Errorf("%w: get %s: %w", ErrStorage, key, err)
	}
	defer rc.Close()
	var src io.Reader = rc
	if n >= 0 {
		src = io.LimitReader(rc, n)
	}
	b, err := io.ReadAll(src)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrStorage, key, err)
	}
	return b, nil
}

// object reads a whole small object (an index, a snapshot, a checkpoint),
// bounded by limit bytes. A missing object reads as missing (ok false).
func (r *Reader) object(ctx context.Context, seg *Segment, kind FileKind, limit int64) ([]byte, bool, error) {
	key := ObjectKey(r.cfg.Prefix, seg, kind)
	b, err := r.get(ctx, key, 0, limit+1)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > limit {
		return nil, false, fmt.Errorf("%w: %s is over %d bytes", ErrStorage, key, limit)
	}
	return b, true, nil
}

// maxIndexObject bounds an index object read whole.
const maxIndexObject = 256 << 20

// indexObject reads seg's index object of kind, from the on-disk cache if
// it holds it, else from the store (then caching it on disk). A missing
// offset or time index is cached as an empty file (it reads as empty); a
// missing transaction index is not cached (it is an error to its
// readers).
func (r *Reader) indexObject(ctx context.Context, seg *Segment, kind FileKind) ([]byte, bool, error) {
	key := indexKey{id: seg.ID, kind: kind}
	if r.disk != nil {
		if b, ok := r.disk.get(key); ok {
			return b, true, nil
		}
	}
	b, ok, err := r.object(ctx, seg, kind, maxIndexObject)
	if err != nil {
		return nil, false, err
	}
	if r.disk != nil && (ok || kind != FileTxnIndex) {
		r.disk.put(seg.StartOffset, key, b)
	}
	return b, ok, nil
}

// badIndex forgets an index file that did not parse, so that the next
// read takes the object again.
func (r *Reader) badIndex(seg *Segment, kind FileKind) {
	if r.disk != nil {
		r.disk.drop(indexKey{id: seg.ID, kind: kind})
	}
}

// offsetIndex returns seg's parsed offset index (cached). A missing index
// object reads as empty (a segment that never had an entry): the read
// scans from the segment's start.
func (r *Reader) offsetIndex(ctx context.Context, seg *Segment) (storage.OffsetIndex, error) {
	key := indexKey{id: seg.ID, kind: FileOffsetIndex}
	if v, ok := r.index.get(key); ok {
		return v.(storage.OffsetIndex), nil
	}
	b, _, err := r.indexObject(ctx, seg, FileOffsetIndex)
	if err != nil {
		return storage.OffsetIndex{}, err
	}
	size := seg.SizeBytes
	if size <= 0 {
		size = 1 << 62
	}
	ix, err := storage.ParseOffsetIndex(b, size)
	if err != nil {
		r.badIndex(seg, FileOffsetIndex)
		return storage.OffsetIndex{}, fmt.Errorf("%w: %s: %v", ErrStorage, ObjectKey(r.cfg.Prefix, seg, FileOffsetIndex), err)
	}
	r.index.add(key, ix, int64(len(b))+64)
	return ix, nil
}

// timeIndex returns seg's parsed time index (cached); missing reads as
// empty.
func (r *Reader) timeIndex(ctx context.Context, seg *Segment) (storage.TimeIndex, error) {
	key := indexKey{id: seg.ID, kind: FileTimeIndex}
	if v, ok := r.index.get(key); ok {
		return v.(storage.TimeIndex), nil
	}
	b, _, err := r.indexObject(ctx, seg, FileTimeIndex)
	if err != nil {
		return storage.TimeIndex{}, err
	}
	ix, err := storage.ParseTimeIndex(b, seg.EndOffset+1-seg.StartOffset)
	if err != nil {
		r.badIndex(seg, FileTimeIndex)
		return storage.TimeIndex{}, fmt.Errorf("%w: %s: %v", ErrStorage, ObjectKey(r.cfg.Prefix, seg, FileTimeIndex), err)
	}
	r.index.add(key, ix, int64(len(b))+64)
	return ix, nil
}

// txnIndex returns seg's aborted transactions whose marker is in the
// segment (cached). A segment with TxnIndexEmpty has none; a missing
// object of one without is an error (the answer would miss aborts).
func (r *Reader) txnIndex(ctx context.Context, seg *Segment) ([]storage.AbortedTxn, error) {
	if seg.TxnIndexEmpty {
		return nil, nil
	}
	key := indexKey{id: seg.ID, kind: FileTxnIndex}
	if v, ok := r.index.get(key); ok {
		return v.([]storage.AbortedTxn), nil
	}
	b, ok, err := r.indexObject(ctx, seg, FileTxnIndex)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s: %w", ErrStorage, ObjectKey(r.cfg.Prefix, seg, FileTxnIndex), objstore.ErrNotFound)
	}
	var es []storage.AbortedTxn
	for _, e := range storage.ParseTxnIndex(b) {
		if e.LastOffset >= seg.StartOffset && e.LastOffset <= seg.EndOffset {
			es = append(es, e)
		}
	}
	r.index.add(key, es, int64(len(b))+64)
	return es, nil
}
