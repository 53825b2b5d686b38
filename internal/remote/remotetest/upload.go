// Package remotetest makes remote log segments for tests: it copies a
// local log's sealed segments into an object store under the remote
// object layout and records them in a remote.MemMetadata, as tiered
// storage's uploader does, so that the local copies can then be deleted
// (storage.Log.DeleteLocalBelow) and reads go to the remote log.
package remotetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

// maxFile bounds a local file read.
const maxFile = 1 << 30

// Upload copies every sealed segment of log (in directory dir of fsys)
// that lies wholly below offset, and is not already in meta, to store
// under prefix, and adds it to meta as CopyFinished by broker 0. It
// returns the segments added. The producer snapshot object is the local
// snapshot at the segment's end if there is one, else an empty state; the
// leader-epoch checkpoint is the log's cache cut at the segment's end.
func Upload(ctx context.Context, fsys vfs.FS, log *storage.Log, store objstore.Store, meta *remote.MemMetadata, prefix string, p remote.Partition, offset int64) ([]remote.Segment, error) {
	dir := log.Dir()
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, n := range names {
		if b, ok := parseName(n, ".log"); ok {
			bases = append(bases, b)
		}
	}
	slices.Sort(bases)
	have := map[int64]bool{}
	for _, s := range meta.Segments(p) {
		have[s.StartOffset] = true
	}
	var out []remote.Segment
	for i := 0; i+1 < len(bases) && bases[i+1] <= offset; i++ {
		base, next := bases[i], bases[i+1]
		if have[base] {
			continue
		}
		s, err := uploadOne(ctx, fsys, log, store, prefix, p, dir, base, next)
		if err != nil {
			return out, fmt.Errorf("segment %d: %w", base, err)
		}
		meta.Add(s)
		out = append(out, s)
	}
	return out, nil
}

func uploadOne(ctx context.Context, fsys vfs.FS, log *storage.Log, store objstore.Store, prefix string, p remote.Partition, dir string, base, next int64) (remote.Segment, error) {
	file := func(off int64, suffix string) ([]byte, bool, error) {
		b, err := vfs.ReadFile(fsys, filepath.Join(dir, fmt.Sprintf("%020d%s", off, suffix)), maxFile)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return b, err == nil, err
	}
	data, _, err := file(base, ".log")
	if err != nil {
		return remote.Segment{}, err
	}
	s := remote.Segment{Partition: p, StartOffset: base, EndOffset: next - 1, MaxTimestamp: -1,
		SizeBytes: int64(len(data)), State: remote.CopyFinished}
	if _, err := rand.Read(s.ID[:]); err != nil {
		return remote.Segment{}, err
	}
	for rest := data; len(rest) > 0; {
		h, _, r, err := batch.Next(rest)
		if err != nil {
			return remote.Segment{}, err
		}
		rest = r
		s.MaxTimestamp = max(s.MaxTimestamp, h.MaxTimestamp)
		if k := len(s.LeaderEpochs); k == 0 || s.LeaderEpochs[k-1].Epoch != h.LeaderEpoch {
			s.LeaderEpochs = append(s.LeaderEpochs, epoch.Entry{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
		}
	}
	objs := map[remote.FileKind][]byte{remote.FileLog: data}
	for kind, suffix := range map[remote.FileKind]string{remote.FileOffsetIndex: ".index", remote.FileTimeIndex: ".timeindex", remote.FileTxnIndex: ".txnindex"} {
		b, ok, err := file(base, suffix)
		if err != nil {
			return remote.Segment{}, err
		}
		if ok || kind != remote.FileTxnIndex {
			objs[kind] = b
		}
	}
	s.TxnIndexEmpty = len(objs[remote.FileTxnIndex]) == 0
	if s.TxnIndexEmpty {
		delete(objs, remote.FileTxnIndex)
	}
	snap, ok, err := file(next, ".snapshot")
	if err != nil {
		return remote.Segment{}, err
	}
	if !ok {
		snap = producer.NewState().Encode()
	}
	objs[remote.FileProducerSnapshot] = snap
	var entries []epoch.Entry
	for _, e := range log.EpochEntries() {
		if e.StartOffset <= s.EndOffset {
			entries = append(entries, e)
		}
	}
	objs[remote.FileLeaderEpochs] = epoch.New(entries).Encode()
	for kind, b := range objs {
		if err := store.Put(ctx, remote.ObjectKey(prefix, &s, kind), strings.NewReader(string(b)), int64(len(b))); err != nil {
			return remote.Segment{}, err
		}
	}
	return s, nil
}

func parseName(name, suffix string) (int64, bool) {
	d, ok := strings.CutSuffix(name, suffix)
	if !ok || len(d) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(d, 10, 64)
	return v, err == nil
}
