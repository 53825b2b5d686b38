package remote

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/storage"
)

// maxChain bounds how many remote segments one lookup walks.
const maxChain = 1 << 16

// AbortedTxns returns the aborted transactions of p's remote log that
// overlap [from, upto), searching the remote transaction indexes from the
// segment holding from, segment after segment, until an entry's
// LastStable reaches upto (the rule of storage.Log.AbortedTxns). Only
// markers below localStart count, and the walk stops at a segment
// starting at or above it: the local log answers from there. complete is
// false when the remote segments ran out first: the caller goes on with
// the local log's (Kafka's RemoteLogManager.collectAbortedTransactions,
// then collectAbortedTransactionInLocalSegments). The segments are
// listed once: the walk usually reaches every segment up to the local log
// (a read without aborts after it), so listing them at each step would
// make a consumer's pass over a remote log of S segments cost S² copies
// of the list.
func (r *Reader) AbortedTxns(ctx context.Context, p Partition, lineage []epoch.Entry, from, upto, localStart int64) (out []storage.AbortedTxn, complete bool, err error) {
	segs := r.meta.Segments(p)
	seg, ok := findSegment(segs, lineage, from)
	for n := 0; ok && n < maxChain && seg.StartOffset < localStart; n++ {
		es, err := r.txnIndex(ctx, &seg)
		if err != nil {
			return nil, false, err
		}
		for _, e := range es {
			if e.LastOffset >= localStart {
				return out, false, nil
			}
			if e.LastOffset >= from && e.FirstOffset < upto {
				out = append(out, e)
			}
			if e.LastStable >= upto {
				return out, true, nil
			}
		}
		seg, ok = findSegment(segs, lineage, seg.EndOffset+1)
	}
	return out, false, nil
}

// OffsetForTimestamp finds the first record of p's remote log at or after
// logStart whose timestamp is at least ts (Kafka's
// RemoteLogManager.findOffsetByTimestamp): the segments of the lineage in
// offset order, skipping those whose MaxTimestamp is below ts, the remote
// time and offset indexes narrowing the scan to a batch. ok is false when
// no remote record qualifies (the caller looks in the local log).
func (r *Reader) OffsetForTimestamp(ctx context.Context, p Partition, lineage []epoch.Entry, ts, logStart int64) (offset, timestamp int64, ok bool, err error) {
	segs := r.meta.Segments(p)
	seg, found := findSegment(segs, lineage, logStart)
	if !found {
		// The log start is below every remote segment (retention raced
		// this lookup): start with the first one above it.
		for _, s := range segs {
			if s.StartOffset >= logStart {
				seg, found = findSegment(segs, lineage, s.StartOffset)
				break
			}
		}
	}
	for n := 0; found && n < maxChain; n++ {
		if seg.MaxTimestamp >= ts {
			offset, timestamp, ok, err = r.lookupTimestamp(ctx, &seg, ts, logStart)
			if err != nil || ok {
				return offset, timestamp, ok, err
			}
		}
		seg, found = findSegment(segs, lineage, seg.EndOffset+1)
	}
	return 0, 0, false, nil
}

// lookupTimestamp scans seg for the first record at or after logStart with
// a timestamp at least ts.
func (r *Reader) lookupTimestamp(ctx context.Context, seg *Segment, ts, logStart int64) (offset, timestamp int64, ok bool, err error) {
	tix, err := r.timeIndex(ctx, seg)
	if err != nil {
		return 0, 0, false, err
	}
	oix, err := r.offsetIndex(ctx, seg)
	if err != nil {
		return 0, 0, false, err
	}
	pos := oix.Floor(tix.Lower(ts))
	for {
		h, more, err := r.header(ctx, seg, pos)
		if err != nil || !more {
			return 0, 0, false, err
		}
		size := int64(h.Size())
		if h.MaxTimestamp >= ts && h.NextOffset() > logStart {
			if h.LogAppendTime() {
				return max(h.BaseOffset, logStart), h.MaxTimestamp, true, nil
			}
			b, err := r.readRange(ctx, seg, pos, size)
			if err != nil {
				return 0, 0, false, err
			}
			rerr := batch.Records(b, func(rec batch.Record) bool {
				o, t := h.BaseOffset+int64(rec.OffsetDelta), h.BaseTimestamp+rec.TimestampDelta
				if t >= ts && o >= logStart {
					offset, timestamp, ok = o, t, true
					return false
				}
				return true
			})
			if ok {
				return offset, timestamp, true, nil
			}
			if rerr != nil {
				return 0, 0, false, fmt.Errorf("%w: %s at %d: %v", ErrStorage, ObjectKey(r.cfg.Prefix, seg, FileLog), pos, rerr)
			}
		}
		pos += size
	}
}

// maxAuxObject bounds the leader-epoch checkpoint and producer snapshot
// objects read whole.
const maxAuxObject = 256 << 20

// AuxState is what a follower rebuilds its log from when its fetch offset
// moved to the remote log (KIP-405's follower path, Kafka's
// ReplicaFetcherTierStateMachine.buildRemoteLogAuxState): the remote
// segment holding the offset just below the leader's local log start, its
// leader-epoch checkpoint and its producer snapshot, both as of the
// segment's end.
type AuxState struct {
	Segment   Segment
	Epochs    []epoch.Entry
	Producers *producer.State
}

// ErrNoAuxState is returned by Aux when no remote segment holds the
// offset, or its objects are missing: the follower retries later.
var ErrNoAuxState = errors.New("remote: no remote segment to rebuild the follower from")

// Aux reads the AuxState of the remote segment of p holding offset whose
// leader epoch for it is the highest not above leaderEpoch (the leader's
// epoch for its local log start: a segment of a lineage the leader no
// longer has is never taken).
func (r *Reader) Aux(ctx context.Context, p Partition, offset int64, leaderEpoch int32) (AuxState, error) {
	var seg *Segment
	segs := r.meta.Segments(p)
	for i := range segs {
		s := &segs[i]
		if !s.Covers(offset) {
			continue
		}
		e := epochAt(s.LeaderEpochs, offset)
		if leaderEpoch >= 0 && e > leaderEpoch {
			continue
		}
		if seg == nil || e >= epochAt(seg.LeaderEpochs, offset) {
			seg = s
		}
	}
	if seg == nil {
		return AuxState{}, fmt.Errorf("%w: %s-%d offset %d", ErrNoAuxState, p.Topic, p.Partition, offset)
	}
	eb, ok, err := r.object(ctx, seg, FileLeaderEpochs, maxAuxObject)
	if err != nil {
		return AuxState{}, err
	}
	if !ok {
		return AuxState{}, fmt.Errorf("%w: %s missing", ErrNoAuxState, ObjectKey(r.cfg.Prefix, seg, FileLeaderEpochs))
	}
	ec, err := epoch.Decode(eb)
	if err != nil {
		return AuxState{}, fmt.Errorf("%w: %s: %v", ErrStorage, ObjectKey(r.cfg.Prefix, seg, FileLeaderEpochs), err)
	}
	pb, ok, err := r.object(ctx, seg, FileProducerSnapshot, maxAuxObject)
	if err != nil {
		return AuxState{}, err
	}
	if !ok {
		return AuxState{}, fmt.Errorf("%w: %s missing", ErrNoAuxState, ObjectKey(r.cfg.Prefix, seg, FileProducerSnapshot))
	}
	ps, err := producer.Decode(pb)
	if err != nil {
		return AuxState{}, fmt.Errorf("%w: %s: %v", ErrStorage, ObjectKey(r.cfg.Prefix, seg, FileProducerSnapshot), err)
	}
	// The checkpoint as of the segment's end: nothing of a later epoch.
	var entries []epoch.Entry
	for _, e := range ec.Entries() {
		if e.StartOffset <= seg.EndOffset {
			entries = append(entries, e)
		}
	}
	return AuxState{Segment: *seg, Epochs: entries, Producers: ps}, nil
}
