package broker

// The remote log manager (KIP-405; Kafka's RemoteLogManager with its
// RLMCopyTask and RLMExpirationTask). With Options.RemoteStore, every
// remote.log.manager.task.interval.ms the loop (rlmLoop) syncs the remote
// log metadata of the partitions with remote.storage.enable hosted here
// (rlmstore.go) and then:
//
//   - on each such partition it leads, runs the partition's task (at most
//     one at a time per partition, on a background goroutine): it cleans
//     up segments a crash or a failed copy left COPY_SEGMENT_STARTED (or
//     DELETE_SEGMENT_STARTED): their objects are deleted and they are
//     marked DELETE_*; it copies, in order, each rolled segment wholly
//     below the high watermark and the last stable offset that holds
//     offsets above the highest offset already copied in this leader's
//     epoch lineage (COPY_SEGMENT_STARTED, the objects, then
//     COPY_SEGMENT_FINISHED; several at once, finished in order; none
//     with remote.log.copy.disable); and it expires remote segments by
//     retention.ms / retention.bytes over the whole log and below the log
//     start (RLMExpirationTask), raising the log start first, and the
//     segments off its epoch lineage;
//   - on each follower replica, lets local retention delete what the
//     leader has copied (Kafka's followers do too).
//
// The copies run off the partition's owner, at most
// remote.log.manager.copier.thread.pool.size at a time, within
// remote.log.manager.copy.max.bytes.per.second; what a copy changes in the
// log (local segments deleted by local retention, the log start raised
// by expiration) the owner applies as its steps, the log's one writer
// (owner.go). A failing partition is retried with a backoff
// (remote.log.manager.task.retry.backoff.ms doubling up to
// remote.log.manager.task.retry.backoff.max.ms); while copies fail,
// nothing un-copied is deleted locally, and one WARN per interval names
// the bytes waiting (also the sluice_remote_copy_lag_bytes gauge; the
// other tiered storage metrics are in internal/metrics/remote_rlm.go).
// Leadership errors (a cluster starting, a leader moving) are retried
// quietly, at DEBUG, for rlmSettleTime before they count as failures.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/storage"
)

// rlm is the broker's remote log manager.
type rlm struct {
	b       *Broker
	store   objstore.Store
	prefix  string
	meta    *remoteMeta
	copiers chan struct{} // one token per copy running
	quota   *byteRate
	every   time.Duration
	backoff time.Duration
	maxBack time.Duration
	opTime  time.Duration // bound of one object store or metadata call

	mu    sync.Mutex
	parts map[TP]*rlmPart
	// errs counts failures since the last pass; lastErr is the latest.
	errs    int
	lastErr error
	// settling is when the current run of leadership errors (settling)
	// began, zero when the last metadata sync succeeded.
	settling time.Time
	// gauges are the per-topic gauges as of the last pass
	// (metrics.RemoteTopicGauges).
	gauges map[string]metrics.RemoteTopicGauges

	// step is the pass in progress in step mode (rlmstep.go).
	step rlmStepper
}

// rlmSettleTime is how long leadership errors (settling) are retried
// quietly, logged at DEBUG, before they count as failures in the WARN of
// alarm: on a cluster's start the partitions of __remote_log_metadata and
// of the tiered topics get their leaders over the first seconds.
const rlmSettleTime = 30 * time.Second

// settlingErr reports whether err is one that leadership moving or
// still being elected gives (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
// a fenced or unknown leader epoch, a partition or peer not known yet,
// a task stopped as its replica stopped leading).
func settlingErr(err error) bool {
	for _, e := range []error{kerr.NotLeaderForPartition, kerr.LeaderNotAvailable, kerr.FencedLeaderEpoch,
		kerr.UnknownLeaderEpoch, kerr.UnknownTopicOrPartition, kerr.BrokerNotAvailable, errNotLeader} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// rlmPart is the manager's state of one partition (rlm.mu).
type rlmPart struct {
	running  bool
	failures int
	retryAt  time.Time
	// copied is the highest offset copied to the remote log in the
	// replica's epoch lineage, as last computed (-1: none).
	copied int64
	// delLagBytes and delLagSegs are the remote segments the running
	// expiration found past retention and has not deleted yet
	// (RemoteDeleteLagBytes, RemoteDeleteLagSegments).
	delLagBytes, delLagSegs int64
}

func newRLM(b *Broker, store objstore.Store) *rlm {
	cfg := b.cfg
	prefix, _ := cfg.Get("sluice.remote.storage.prefix")
	r := &rlm{b: b, store: store, prefix: prefix, meta: newRemoteMeta(b), parts: map[TP]*rlmPart{},
		copiers: make(chan struct{}, max(cfg.Int("remote.log.manager.copier.thread.pool.size", 10), 1)),
		every:   time.Duration(max(cfg.Int("remote.log.manager.task.interval.ms", 30000), 10)) * time.Millisecond,
		backoff: time.Duration(max(cfg.Int("remote.log.manager.task.retry.backoff.ms", 500), 1)) * time.Millisecond,
		maxBack: time.Duration(max(cfg.Int("remote.log.manager.task.retry.backoff.max.ms", 30000), 1)) * time.Millisecond,
		opTime:  time.Minute,
	}
	r.quota = newByteRate(b.clock, cfg.Int("remote.log.manager.copy.max.bytes.per.second", 1<<63-1))
	return r
}

// RemoteMetadata returns the remote log metadata of the partitions this
// broker hosts (their COPY_SEGMENT_FINISHED segments), kept current by the
// remote log manager from __remote_log_metadata; nil without
// Options.RemoteStore.
func (b *Broker) RemoteMetadata() remote.Metadata {
	if b.rlm == nil {
		return nil
	}
	return &b.rlm.meta.cache
}

// SyncRemoteMetadata reads the remote log metadata of the partitions
// named up to the high watermark of their __remote_log_metadata
// partitions, so that RemoteMetadata holds every segment state written
// (and acknowledged) before the call.
func (b *Broker) SyncRemoteMetadata(ctx context.Context, ps ...remote.Partition) error {
	if b.rlm == nil {
		return nil
	}
	return b.rlm.meta.sync(ctx, ps...)
}

// remotePartition names p in the remote log.
func remotePartition(p *Partition) remote.Partition {
	return remote.Partition{TopicID: p.topicID, Topic: p.Topic, Partition: p.Partition}
}

// rlmLoop runs the manager's pass every remote.log.manager.task.interval.ms.
func (b *Broker) rlmLoop() {
	defer b.wg.Done()
	t := b.clock.NewTicker(b.rlm.every)
	defer t.Stop()
	for {
		select {
		case <-b.closing:
			return
		case <-t.C():
		}
		b.rlm.pass()
	}
}

// tiered returns the open partitions with remote storage on.
func (r *rlm) tiered() []*Partition {
	var out []*Partition
	for _, p := range r.b.Partitions() {
		if p.log.Config().RemoteStorage && p.Topic != remote.MetadataTopic {
			out = append(out, p)
		}
	}
	return out
}

// pass is one round of the manager (see the top of the file).
func (r *rlm) pass() {
	parts := r.tiered()
	r.mu.Lock()
	for tp := range r.parts {
		if !r.parts[tp].running && !hosts(parts, tp) {
			delete(r.parts, tp)
		}
	}
	r.mu.Unlock()
	if len(parts) > 0 {
		r.schedule(parts)
	}
	r.alarm(parts)
}

func hosts(parts []*Partition, tp TP) bool {
	for _, p := range parts {
		if p.TP == tp {
			return true
		}
	}
	return false
}

// schedule syncs the metadata, starts the leaders' tasks that are due
// and applies local retention on the followers.
func (r *rlm) schedule(parts []*Partition) {
	if err := r.meta.ensureTopic(); err != nil {
		r.failed(nil, err)
		return
	}
	rps := make([]remote.Partition, len(parts))
	for i, p := range parts {
		rps[i] = remotePartition(p)
	}
	ctx, cancel := r.opCtx(r.taskCtx())
	err := r.meta.sync(ctx, rps...)
	cancel()
	if err != nil {
		r.failed(nil, err)
		return
	}
	r.mu.Lock()
	r.settling = time.Time{}
	r.mu.Unlock()
	now := r.b.now()
	for i, p := range parts {
		if r.step.stopped {
			return
		}
		if !p.IsLeader() {
			copied := r.highestCopied(rps[i], p)
			r.setCopied(p.TP, copied)
			p.applyLocalRetention(now, copied)
			continue
		}
		r.mu.Lock()
		st := r.part(p.TP)
		due := !st.running && !now.Before(st.retryAt)
		if due {
			st.running = true
		}
		r.mu.Unlock()
		if due && r.b.steps {
			// Step mode: the task runs in the pass (rlmstep.go).
			if r.step.stopped {
				return
			}
			r.leaderTask(p)
			continue
		}
		if due && !r.b.goBackground(func() { r.leaderTask(p) }) {
			r.mu.Lock()
			st.running = false
			r.mu.Unlock()
		}
	}
}

// part returns tp's state, created on first use (r.mu held).
func (r *rlm) part(tp TP) *rlmPart {
	st := r.parts[tp]
	if st == nil {
		st = &rlmPart{copied: -1}
		r.parts[tp] = st
	}
	return st
}

func (r *rlm) setCopied(tp TP, copied int64) {
	r.mu.Lock()
	r.part(tp).copied = copied
	r.mu.Unlock()
}

// copiedEnd is the highest offset of tp known copied (-1: none).
func (r *rlm) copiedEnd(tp TP) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.parts[tp]; st != nil {
		return st.copied
	}
	return -1
}

// failed counts a failure (of tp's task when tp is not nil).
func (r *rlm) failed(tp *TP, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.b.now()
	quiet := false
	if settlingErr(err) {
		if r.settling.IsZero() {
			r.settling = now
		}
		quiet = now.Sub(r.settling) < rlmSettleTime
	}
	if quiet {
		r.b.log.Debug("remote log manager: leadership settling, retrying", "err", err)
	} else {
		r.errs++
		r.lastErr = err
	}
	if tp == nil {
		metrics.RemoteCopyErrors.WithLabelValues("").Inc()
		return
	}
	metrics.RemoteCopyErrors.WithLabelValues(tp.Topic).Inc()
	st := r.part(*tp)
	st.failures++
	d := r.backoff << min(st.failures-1, 20)
	st.retryAt = r.b.now().Add(min(d, r.maxBack))
}

// leaderTask is one run of p's task as leader (RLMCopyTask and
// RLMExpirationTask), on a background goroutine.
func (r *rlm) leaderTask(p *Partition) {
	err := r.runLeader(p)
	if r.step.stopped {
		err = errStepStopped
	}
	r.mu.Lock()
	st := r.part(p.TP)
	st.running = false
	if err == nil {
		st.failures, st.retryAt = 0, time.Time{}
	}
	r.mu.Unlock()
	if err != nil && r.b.ctx.Err() == nil && !r.step.stopped {
		r.failed(&p.TP, err)
		r.b.log.Debug("remote log task", "topic", p.Topic, "partition", p.Partition, "err", err)
	}
}

// errNotLeader ends a task whose replica stopped leading (or changed
// leader epoch): the new leader's task continues from the metadata.
var errNotLeader = errors.New("remote log manager: no longer the leader")

func (r *rlm) runLeader(p *Partition) error {
	ctx, cancel := context.WithCancel(r.taskCtx())
	defer cancel()
	rp := remotePartition(p)
	ep := p.LeaderEpoch()
	if err := r.sync(ctx, rp); err != nil {
		return err
	}
	// Segments a crash or a failed copy left half done (Kafka deletes
	// such dangling segments and their objects), once no longer needed
	// (danglingDone).
	all := r.meta.cache.All(rp)
	finished := r.meta.cache.Segments(rp)
	lineage, logStart, leo := p.log.EpochEntries(), p.LogStartOffset(), p.LogEndOffset()
	for _, s := range all {
		if s.State == remote.DeleteStarted || s.State == remote.CopyStarted && danglingDone(&s, finished, lineage, logStart, leo) {
			if err := r.deleteSegment(ctx, p, s); err != nil {
				return err
			}
		}
	}
	if err := r.copyAll(ctx, p, rp, ep); err != nil {
		return err
	}
	return r.expire(ctx, p, rp, ep)
}

// danglingDone reports whether s, a segment left COPY_SEGMENT_STARTED,
// may be deleted by a leader whose leader-epoch cache is lineage, whose
// log starts at logStart and ends at leo, and whose remote log metadata
// holds the COPY_SEGMENT_FINISHED segments finished: it lies below the
// log start, or off the lineage (withinLineage), or other finished
// segments of the lineage hold its whole range. A copy STARTED by an
// earlier leader may still finish (its COPY_SEGMENT_FINISHED written, or
// waiting to commit, after this leader read the metadata), and its
// replicas then delete the range locally: deleting it before its range
// is held elsewhere could leave those records in no tier (the real-broker
// simulator found it: a deposed leader's copy finished while its
// successor deleted it as dangling, and the deposed leader, a follower
// by then, had deleted the segment locally). A copy that truly died is
// deleted once this leader has copied the range again.
func danglingDone(s *remote.Segment, finished []remote.Segment, lineage []epoch.Entry, logStart, leo int64) bool {
	if s.EndOffset < logStart || !withinLineage(s, lineage, logStart, leo) {
		return true
	}
	covered := max(s.StartOffset, logStart)
	for _, f := range finished { // in StartOffset order
		if f.ID != s.ID && f.StartOffset <= covered && f.EndOffset >= covered && withinLineage(&f, lineage, logStart, leo) {
			covered = f.EndOffset + 1
		}
	}
	return covered > s.EndOffset
}

// sync is meta.sync bounded by opTime.
func (r *rlm) sync(ctx context.Context, rp remote.Partition) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	return r.meta.sync(ctx, rp)
}

// publish writes one metadata record bounded by opTime.
func (r *rlm) publish(ctx context.Context, rp remote.Partition, value []byte) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	return r.meta.publish(ctx, rp, value)
}

// highestCopied is the highest offset copied to the remote log in p's
// epoch lineage (Kafka's RemoteLogManager.findHighestRemoteOffset): for
// the newest epoch the remote log has offsets of, the smaller of its
// highest remote offset and the epoch's end in p's log; -1 if none.
func (r *rlm) highestCopied(rp remote.Partition, p *Partition) int64 {
	return highestCopied(&r.meta.cache, rp, p.log.EpochEntries(), p.LogEndOffset())
}

func highestCopied(c *remote.Cache, rp remote.Partition, es []epoch.Entry, leo int64) int64 {
	for i := len(es) - 1; i >= 0; i-- {
		h, ok := c.HighestOffsetForEpoch(rp, es[i].Epoch)
		if !ok {
			continue
		}
		end := leo - 1
		if i+1 < len(es) {
			end = es[i+1].StartOffset - 1
		}
		return min(h, end)
	}
	return -1
}

// copyAll copies p's eligible segments, each rolled segment wholly below
// the high watermark and the last stable offset (Kafka copies up to the
// LSO, so no open transaction is in the remote log) that holds offsets
// above the highest offset copied, until none is left.
//
// Kafka's RLMCopyTask copies one segment after the other. Here the copies
// of one partition overlap, up to remote.log.manager.copier.thread.pool.size
// at a time (within the broker-wide copier pool), so that uploads keep up
// with a fast producer and un-copied data does not pile up on the local
// disk: each copy writes COPY_SEGMENT_STARTED and its objects as soon as
// it starts, but COPY_SEGMENT_FINISHED only after the copy of the segment
// before it finished, so the remote log never has a gap below a finished
// segment. A copy that fails stops the ones after it (left STARTED, they
// are cleaned up as dangling copies). After each FINISHED the owner's
// local retention runs at once with the new copied offset.
func (r *rlm) copyAll(ctx context.Context, p *Partition, rp remote.Partition, ep int32) error {
	copied := r.highestCopied(rp, p)
	r.setCopied(p.TP, copied)
	p.applyLocalRetention(r.b.now(), copied)
	// remote.log.copy.disable (KIP-950): no more copies (Kafka's
	// RLMCopyTask skips the partition); reads and expiration go on.
	if p.log.Config().RemoteCopyDisable {
		return nil
	}
	for {
		if !p.IsLeader() || p.LeaderEpoch() != ep {
			return errNotLeader
		}
		segs := r.eligible(p, copied)
		if len(segs) == 0 {
			return nil
		}
		if err := r.copyPipelined(ctx, p, rp, ep, segs); err != nil {
			return err
		}
		before := copied
		if copied = r.copiedEnd(p.TP); copied <= before {
			// Nothing more counts as copied in the lineage: the next
			// pass looks again rather than copying the same again.
			return nil
		}
	}
}

// eligible returns p's rolled segments wholly below the high watermark and
// the last stable offset holding offsets above copied, in offset order.
func (r *rlm) eligible(p *Partition, copied int64) []storage.SegmentInfo {
	limit := min(p.HighWatermark(), p.LastStableOffset())
	if r.b.knobs.CopyAboveHW {
		limit = p.LogEndOffset()
	}
	logStart := p.LogStartOffset()
	var out []storage.SegmentInfo
	for _, s := range p.log.LocalSegments() {
		if s.Active || s.Next > limit {
			break
		}
		if s.Size > 0 && s.Next-1 > copied && s.Next > logStart {
			out = append(out, s)
		}
	}
	return out
}

// copyPipelined copies segs (in offset order) with up to the copier pool
// size of them in flight, each one's COPY_SEGMENT_FINISHED after its
// predecessor's (see copyAll). The first copy runs alone: a failing
// object store sees one attempt per task, not a window of them. It
// returns the first error.
func (r *rlm) copyPipelined(ctx context.Context, p *Partition, rp remote.Partition, ep int32, segs []storage.SegmentInfo) error {
	if r.b.steps {
		// Step mode: one copy after the other, on the pass (rlmstep.go).
		for _, si := range segs {
			prev := make(chan error, 1)
			prev <- nil
			if err := r.copySegment(ctx, p, rp, ep, si, prev); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	window := make(chan struct{}, cap(r.copiers))
	prev := make(chan error, 1)
	prev <- nil
	for i, si := range segs {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		done := make(chan error, 1)
		go func(prev <-chan error) {
			defer func() { <-window }()
			err := r.copySegment(ctx, p, rp, ep, si, prev)
			if err != nil {
				cancel()
			}
			done <- err
		}(prev)
		prev = done
		if i == 0 {
			if err := <-done; err != nil {
				return err
			}
			prev = make(chan error, 1)
			prev <- nil
		}
	}
	// Each copy passes on the error of the one before it: the last
	// started has the first error, and ends after all the others.
	return <-prev
}

// copySegment copies one segment: COPY_SEGMENT_STARTED and its objects;
// then, once the copy before it (prev) has ended without an error,
// COPY_SEGMENT_FINISHED, the metadata read again and the owner's local
// retention with the new copied offset. An error of the copy before it
// is passed on.
func (r *rlm) copySegment(ctx context.Context, p *Partition, rp remote.Partition, ep int32, si storage.SegmentInfo, prev <-chan error) error {
	seg, size, err := r.copyObjects(ctx, p, rp, si)
	if before := <-prev; before != nil {
		return before
	}
	if err != nil {
		return err
	}
	// A replica that stopped leading leaves the segment STARTED: the new
	// leader deletes it.
	if !p.IsLeader() || p.LeaderEpoch() != ep {
		return errNotLeader
	}
	if r.b.knobs.DeleteLocalBeforeCopyFinished {
		p.applyLocalRetention(r.b.now(), seg.EndOffset)
	}
	u := remote.Update{Partition: rp, ID: seg.ID, BrokerID: r.b.cfg.NodeID, EventTimestamp: r.b.now().UnixMilli(), State: remote.CopyFinished}
	if err := r.publish(ctx, rp, remote.EncodeUpdate(&u)); err != nil {
		return fmt.Errorf("COPY_SEGMENT_FINISHED of %d: %w", seg.StartOffset, err)
	}
	metrics.RemoteCopyBytes.WithLabelValues(p.Topic).Add(float64(size))
	r.b.log.Debug("segment copied to the remote log", "topic", p.Topic, "partition", p.Partition, "start", seg.StartOffset, "end", seg.EndOffset, "bytes", size)
	if err := r.sync(ctx, rp); err != nil {
		return err
	}
	copied := r.highestCopied(rp, p)
	r.setCopied(p.TP, copied)
	p.applyLocalRetention(r.b.now(), copied)
	return nil
}

// copyObjects starts the copy of one segment: COPY_SEGMENT_STARTED, then
// its objects (within the broker's copier pool). It returns the segment's
// metadata and log size.
func (r *rlm) copyObjects(ctx context.Context, p *Partition, rp remote.Partition, si storage.SegmentInfo) (remote.Segment, int64, error) {
	sc, err := p.log.SegmentCopy(si.Base)
	if err != nil {
		return remote.Segment{}, 0, err
	}
	seg := remote.Segment{Partition: rp, StartOffset: sc.Base, EndOffset: sc.Next - 1, MaxTimestamp: sc.MaxTimestamp,
		BrokerID: r.b.cfg.NodeID, EventTimestamp: r.b.now().UnixMilli(), LeaderEpochs: sc.SegmentEpochs,
		SizeBytes: sc.LogSize, TxnIndexEmpty: len(sc.TxnIndex) == 0, State: remote.CopyStarted}
	if _, err := io.ReadFull(r.b.rand, seg.ID[:]); err != nil {
		return seg, 0, err
	}
	metrics.RemoteCopyRequests.WithLabelValues(p.Topic).Inc()
	if err := r.publish(ctx, rp, remote.EncodeSegment(&seg)); err != nil {
		return seg, 0, fmt.Errorf("COPY_SEGMENT_STARTED of %d: %w", seg.StartOffset, err)
	}
	select {
	case r.copiers <- struct{}{}:
	case <-ctx.Done():
		return seg, 0, ctx.Err()
	}
	err = r.upload(ctx, &seg, sc)
	<-r.copiers
	if err != nil {
		return seg, 0, fmt.Errorf("copying segment %d: %w", seg.StartOffset, err)
	}
	return seg, sc.LogSize, nil
}

// upload puts the objects of one segment (remote.FileKind): the log
// object, then the small ones at once.
func (r *rlm) upload(ctx context.Context, seg *remote.Segment, sc *storage.SegmentCopy) error {
	put := func(k remote.FileKind, body io.Reader, size int64) error {
		octx, cancel := r.opCtx(ctx)
		defer cancel()
		if err := r.store.Put(octx, remote.ObjectKey(r.prefix, seg, k), &quotaReader{ctx: octx, r: body, q: r.quota}, size); err != nil {
			return fmt.Errorf("put %s: %w", k.Suffix(), err)
		}
		return nil
	}
	small := []struct {
		k remote.FileKind
		b []byte
	}{
		{remote.FileOffsetIndex, sc.Index},
		{remote.FileTimeIndex, sc.TimeIndex},
		{remote.FileTxnIndex, sc.TxnIndex},
		{remote.FileProducerSnapshot, sc.ProducerSnapshot},
		{remote.FileLeaderEpochs, epoch.New(sc.LeaderEpochs).Encode()},
	}
	if err := put(remote.FileLog, io.NewSectionReader(sc.Log, 0, sc.LogSize), sc.LogSize); err != nil {
		return err
	}
	errs := make([]error, len(small))
	var wg sync.WaitGroup
	for i, o := range small {
		if o.k == remote.FileTxnIndex && len(o.b) == 0 {
			continue
		}
		if r.b.steps {
			// Step mode: one after the other (rlmstep.go).
			errs[i] = put(o.k, bytes.NewReader(o.b), int64(len(o.b)))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = put(o.k, bytes.NewReader(o.b), int64(len(o.b)))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// deleteSegment deletes a remote segment: DELETE_SEGMENT_STARTED (unless
// it is already), its objects, DELETE_SEGMENT_FINISHED.
func (r *rlm) deleteSegment(ctx context.Context, p *Partition, s remote.Segment) error {
	metrics.RemoteDeleteRequests.WithLabelValues(p.Topic).Inc()
	err := r.deleteSegmentOnce(ctx, p, s)
	if err != nil {
		metrics.RemoteDeleteErrors.WithLabelValues(p.Topic).Inc()
	}
	return err
}

func (r *rlm) deleteSegmentOnce(ctx context.Context, p *Partition, s remote.Segment) error {
	u := remote.Update{Partition: s.Partition, ID: s.ID, BrokerID: r.b.cfg.NodeID}
	if s.State != remote.DeleteStarted {
		u.State, u.EventTimestamp = remote.DeleteStarted, r.b.now().UnixMilli()
		if err := r.publish(ctx, s.Partition, remote.EncodeUpdate(&u)); err != nil {
			return fmt.Errorf("DELETE_SEGMENT_STARTED of %d: %w", s.StartOffset, err)
		}
	}
	for k := remote.FileLog; k <= remote.FileLeaderEpochs; k++ {
		octx, cancel := r.opCtx(ctx)
		err := r.store.Delete(octx, remote.ObjectKey(r.prefix, &s, k))
		cancel()
		if err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("delete %s of %d: %w", k.Suffix(), s.StartOffset, err)
		}
	}
	u.State, u.EventTimestamp = remote.DeleteFinished, r.b.now().UnixMilli()
	if err := r.publish(ctx, s.Partition, remote.EncodeUpdate(&u)); err != nil {
		return fmt.Errorf("DELETE_SEGMENT_FINISHED of %d: %w", s.StartOffset, err)
	}
	if rr := r.b.RemoteReader(); rr != nil {
		rr.Forget(s.ID) // its cached indexes and chunks
	}
	r.b.log.Debug("remote segment deleted", "topic", p.Topic, "partition", p.Partition, "start", s.StartOffset, "end", s.EndOffset, "state", s.State)
	return r.sync(ctx, s.Partition)
}

// expire is RLMExpirationTask: the oldest remote segments wholly below the
// log start, or past retention.ms, or beyond retention.bytes over the
// whole log (the remote segments of the replica's epoch lineage plus the
// local segments not copied), are deleted; the log start is raised past
// them first, so no reader is sent to a segment being deleted. Segments
// off the lineage (a deposed leader's copy of a range its successor's log
// does not hold, Kafka's RemoteLogManager.isRemoteSegmentWithinLeaderEpochs
// false) are not counted and are deleted too, without moving the log
// start: no reader is sent to them (remote.Reader follows the lineage).
// With remote.log.copy.disable, once no remote segment holds offsets at or
// above the log start, the log start follows the local log start, below
// which retention.* deleted the local segments that were never copied.
func (r *rlm) expire(ctx context.Context, p *Partition, rp remote.Partition, ep int32) error {
	cfg := p.log.Config()
	logStart := p.LogStartOffset()
	lineage := p.log.EpochEntries()
	leo := p.LogEndOffset()
	var segs, diverged []remote.Segment
	for _, s := range r.meta.cache.Segments(rp) {
		switch {
		case s.EndOffset < logStart || withinLineage(&s, lineage, logStart, leo):
			segs = append(segs, s)
		case segmentMaxEpoch(&s) <= ep:
			diverged = append(diverged, s)
		}
		// A segment of an epoch above the replica's is a successor's:
		// this replica no longer leads and leaves it alone.
	}
	nowMs := r.b.now().UnixMilli()
	copied := r.highestCopied(rp, p)
	var total int64
	for _, s := range segs {
		total += s.SizeBytes
	}
	for _, s := range p.log.LocalSegments() {
		if s.Base > copied {
			total += s.Size
		}
	}
	remaining := int64(-1)
	if cfg.Delete && cfg.RetentionBytes >= 0 {
		remaining = total - cfg.RetentionBytes
	}
	newStart := logStart
	var dead []remote.Segment
	for _, s := range segs {
		switch {
		case s.EndOffset < logStart:
		case cfg.Delete && cfg.RetentionMs >= 0 && nowMs-s.MaxTimestamp > cfg.RetentionMs:
			newStart = max(newStart, s.EndOffset+1)
		case remaining >= s.SizeBytes && remaining > 0:
			newStart = max(newStart, s.EndOffset+1)
		default:
			goto done
		}
		remaining -= s.SizeBytes
		dead = append(dead, s)
	}
done:
	var deadBytes int64
	for _, s := range dead {
		deadBytes += s.SizeBytes
	}
	r.setDeleteLag(p.TP, deadBytes, int64(len(dead)))
	if cfg.RemoteCopyDisable && len(dead) == len(segs) {
		newStart = max(newStart, p.log.LocalLogStartOffset())
	}
	if newStart > logStart {
		if p.LeaderEpoch() != ep {
			return errNotLeader
		}
		if err := p.AdvanceLogStart(newStart); err != nil {
			return fmt.Errorf("raising the log start to %d: %w", newStart, err)
		}
	}
	for i, s := range append(dead, diverged...) {
		if p.LeaderEpoch() != ep {
			return errNotLeader
		}
		if err := r.deleteSegment(ctx, p, s); err != nil {
			return err
		}
		if i < len(dead) {
			deadBytes -= s.SizeBytes
			r.setDeleteLag(p.TP, deadBytes, int64(len(dead)-i-1))
		}
	}
	r.setDeleteLag(p.TP, 0, 0)
	return nil
}

// withinLineage reports whether remote segment s is on the epoch lineage
// of a replica whose leader-epoch cache is lineage and whose log ends at
// leo (Kafka's RemoteLogManager.isRemoteSegmentWithinLeaderEpochs): it
// ends below leo, and from the log start (or its start, or the first
// lineage entry, whichever is highest) to its end each offset has the
// same epoch in the segment as in the lineage. An empty lineage judges
// nothing (true).
func withinLineage(s *remote.Segment, lineage []epoch.Entry, logStart, leo int64) bool {
	if len(lineage) == 0 {
		return true
	}
	if s.EndOffset >= leo {
		return false
	}
	lo := max(s.StartOffset, logStart, lineage[0].StartOffset)
	if lo > s.EndOffset {
		return true
	}
	// Both are step functions of the offset: they agree on [lo, end]
	// when they agree at lo and at every step of either inside it.
	agree := func(off int64) bool { return epochAt(s.LeaderEpochs, off) == epochAt(lineage, off) }
	if !agree(lo) {
		return false
	}
	for _, es := range [][]epoch.Entry{s.LeaderEpochs, lineage} {
		for _, e := range es {
			if e.StartOffset > lo && e.StartOffset <= s.EndOffset && !agree(e.StartOffset) {
				return false
			}
		}
	}
	return true
}

// epochAt is the epoch of offset in es (entries in offset order), -1
// below the first.
func epochAt(es []epoch.Entry, offset int64) int32 {
	e := int32(-1)
	for _, en := range es {
		if en.StartOffset > offset {
			break
		}
		e = en.Epoch
	}
	return e
}

// segmentMaxEpoch is the highest leader epoch of s's records.
func segmentMaxEpoch(s *remote.Segment) int32 {
	m := int32(-1)
	for _, e := range s.LeaderEpochs {
		m = max(m, e.Epoch)
	}
	return m
}

// setDeleteLag records the remote segments of tp past retention and not
// yet deleted.
func (r *rlm) setDeleteLag(tp TP, bytes, segs int64) {
	r.mu.Lock()
	st := r.part(tp)
	st.delLagBytes, st.delLagSegs = bytes, segs
	r.mu.Unlock()
}

// alarm computes the per-topic gauges (metrics.RemoteTopicGauges) of the
// partitions led here and, when copies failed since the last pass, logs
// one WARN naming the bytes that stay local until copied.
func (r *rlm) alarm(parts []*Partition) {
	var lagBytes, lagSegs int64
	gauges := map[string]metrics.RemoteTopicGauges{}
	for _, p := range parts {
		if !p.IsLeader() || p.log.Config().RemoteCopyDisable {
			continue
		}
		g := gauges[p.Topic]
		copied := r.copiedEnd(p.TP)
		for _, s := range p.log.LocalSegments() {
			if !s.Active && s.Next-1 > copied {
				g.CopyLagBytes += s.Size
				g.CopyLagSegments++
			}
		}
		lagBytes += g.CopyLagBytes - gauges[p.Topic].CopyLagBytes
		lagSegs += g.CopyLagSegments - gauges[p.Topic].CopyLagSegments
		rp := remotePartition(p)
		for _, s := range r.meta.cache.All(rp) {
			g.MetadataCount++
			if s.State == remote.CopyFinished {
				g.SizeBytes += s.SizeBytes
			}
		}
		r.mu.Lock()
		if st := r.parts[p.TP]; st != nil {
			g.DeleteLagBytes += st.delLagBytes
			g.DeleteLagSegments += st.delLagSegs
		}
		r.mu.Unlock()
		gauges[p.Topic] = g
	}
	r.mu.Lock()
	r.gauges = gauges
	errs, last := r.errs, r.lastErr
	r.errs, r.lastErr = 0, nil
	r.mu.Unlock()
	if errs > 0 {
		r.b.log.Warn("remote log copies failing: segments not copied stay on the local disk, whatever local.retention.* says",
			"failures", errs, "uncopied_bytes", lagBytes, "uncopied_segments", lagSegs, "err", last)
	}
}

// topicGauges returns the per-topic gauges as of the last pass.
func (r *rlm) topicGauges() map[string]metrics.RemoteTopicGauges {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gauges
}

// applyLocalRetention lets p's owner delete the local segments copied to
// the remote log (at or below copied) that local.retention.* no longer
// requires (storage.Log.ApplyLocalRetention), as one of its steps.
func (p *Partition) applyLocalRetention(now time.Time, copied int64) {
	var err error
	var n int
	p.do(func() {
		if p.closed {
			return
		}
		n, err = p.log.ApplyLocalRetention(now, p.localRetentionBound(copied))
	})
	if err != nil {
		if !p.ioFailed("local retention", err) {
			p.b.log.Warn("local retention", "topic", p.Topic, "partition", p.Partition, "err", err)
		}
		return
	}
	if n > 0 {
		p.wake()
	}
}

// localRetentionBound is the highest offset local retention may delete
// (storage.Log.ApplyLocalRetention): the highest offset copied, or with
// remote.log.copy.disable the high watermark minus one, since nothing
// more is copied and retention.* then applies to the local log (KIP-950)
// (p's owner).
func (p *Partition) localRetentionBound(copied int64) int64 {
	if p.log.Config().RemoteCopyDisable {
		return p.r.HW() - 1
	}
	return copied
}

// byteRate bounds a byte rate (remote.log.manager.copy.max.bytes.per.second,
// Kafka's RLMQuotaManager): a bucket of one second's bytes, refilled with
// time; a read waits until the bucket covers it.
type byteRate struct {
	clock interface {
		Now() time.Time
		Sleep(time.Duration)
	}
	rate  float64
	mu    sync.Mutex
	avail float64
	last  time.Time
}

func newByteRate(c interface {
	Now() time.Time
	Sleep(time.Duration)
}, perSecond int64) *byteRate {
	return &byteRate{clock: c, rate: float64(perSecond), avail: float64(perSecond), last: c.Now()}
}

// unlimited is a rate no copy reaches (Kafka's default is Long.MAX_VALUE).
const unlimited = 1 << 62

// wait takes n bytes from the bucket, sleeping until it holds them.
func (q *byteRate) wait(ctx context.Context, n int) error {
	if q.rate >= unlimited {
		return nil
	}
	for {
		q.mu.Lock()
		now := q.clock.Now()
		q.avail = min(q.avail+now.Sub(q.last).Seconds()*q.rate, q.rate)
		q.last = now
		need := float64(n) - q.avail
		if need <= 0 || q.avail >= q.rate {
			q.avail -= float64(n)
			q.mu.Unlock()
			return nil
		}
		q.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		q.clock.Sleep(time.Duration(need / q.rate * float64(time.Second)))
	}
}

// quotaReader reads through a byteRate.
type quotaReader struct {
	ctx context.Context
	r   io.Reader
	q   *byteRate
}

func (qr *quotaReader) Read(b []byte) (int, error) {
	if len(b) > 64<<10 {
		b = b[:64<<10]
	}
	n, err := qr.r.Read(b)
	if n > 0 {
		if werr := qr.q.wait(qr.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}
