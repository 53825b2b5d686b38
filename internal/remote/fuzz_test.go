package remote_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
)

// FuzzRemoteObjects: whatever bytes the store holds for a segment's log,
// offset index, time index, transaction index, leader-epoch checkpoint
// and producer snapshot, the reader returns an error or an answer within
// its contract (whole batches of the log object, below maxOffset, from
// the requested offset on), and never panics or reads without bound.
func FuzzRemoteObjects(f *testing.F) {
	tl := build(&testing.T{}, 60, plainBatch)
	segs, _ := uploadSeeds(tl)
	for _, s := range segs {
		objs := map[remote.FileKind][]byte{}
		for k := remote.FileLog; k <= remote.FileLeaderEpochs; k++ {
			rc, err := tl.store.Get(context.Background(), remote.ObjectKey("", &s, k), 0, -1)
			if err == nil {
				var b bytes.Buffer
				b.ReadFrom(rc)
				objs[k] = b.Bytes()
			}
		}
		f.Add(objs[remote.FileLog], objs[remote.FileOffsetIndex], objs[remote.FileTimeIndex], []byte(nil), objs[remote.FileLeaderEpochs], objs[remote.FileProducerSnapshot], s.StartOffset+3, s.EndOffset)
	}
	f.Fuzz(func(t *testing.T, log, idx, tidx, txn, epochs, snap []byte, offset, end int64) {
		if offset < 0 || end < offset || end-offset > 1<<20 {
			return
		}
		s := remote.Segment{Partition: part, ID: [16]byte{9}, StartOffset: offset - offset%7, EndOffset: end,
			MaxTimestamp: 1 << 50, SizeBytes: int64(len(log)), TxnIndexEmpty: txn == nil, State: remote.CopyFinished}
		store := &objstore.Memory{}
		meta := &remote.MemMetadata{}
		put := func(k remote.FileKind, b []byte) {
			store.Put(context.Background(), remote.ObjectKey("", &s, k), bytes.NewReader(b), int64(len(b)))
		}
		put(remote.FileLog, log)
		put(remote.FileOffsetIndex, idx)
		put(remote.FileTimeIndex, tidx)
		if txn != nil {
			put(remote.FileTxnIndex, txn)
		}
		put(remote.FileLeaderEpochs, epochs)
		put(remote.FileProducerSnapshot, snap)
		meta.Add(s)
		rd := remote.NewReader(store, meta, remote.ReaderConfig{ChunkBytes: 64, ChunkCacheBytes: 256, IndexCacheBytes: 256})
		ctx := context.Background()
		res, err := rd.Read(ctx, part, nil, offset, 1000, end+1, true)
		if err == nil && len(res.Records) > 0 {
			if !bytes.Contains(log, res.Records) {
				t.Fatal("records not from the log object")
			}
			last, firstBatch := int64(-1), true
			for rest := res.Records; len(rest) > 0; {
				h, _, r, err := batch.Next(rest)
				if err != nil {
					t.Fatalf("not whole batches: %v", err)
				}
				if h.BaseOffset > end || (firstBatch && h.NextOffset() <= offset) {
					t.Fatalf("batch %d-%d outside [%d, %d] (%d bytes, next %d)", h.BaseOffset, h.NextOffset(), offset, end, len(res.Records), res.NextOffset)
				}
				last, firstBatch = h.NextOffset(), false
				rest = r
			}
			if res.NextOffset != last {
				t.Fatalf("next offset %d, last batch ends at %d", res.NextOffset, last)
			}
		} else if err != nil && !errors.Is(err, remote.ErrStorage) && !errors.Is(err, remote.ErrNoSegment) {
			t.Fatalf("unexpected error %v", err)
		}
		rd.AbortedTxns(ctx, part, nil, offset, end+1, end+1)
		rd.OffsetForTimestamp(ctx, part, nil, 5, offset)
		if a, err := rd.Aux(ctx, part, end, -1); err == nil {
			for _, e := range a.Epochs {
				if e.StartOffset > end {
					t.Fatalf("epoch entry %v past the segment end %d", e, end)
				}
			}
			_ = epoch.New(a.Epochs)
		}
	})
}

// uploadSeeds tiers part of tl for the fuzz seeds.
func uploadSeeds(tl *tiered) ([]remote.Segment, error) {
	t := &testing.T{}
	tl.tier(t, tl.log.LogEndOffset()/2)
	return tl.segs, nil
}
