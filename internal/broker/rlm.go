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
//     COPY_SEGMENT_FINISHED); and it expires remote segments by
//     retention.ms / retention.bytes over the whole log and below the log
//     start (RLMExpirationTask), raising the log start first;
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

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/metadata"
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
	// gauges are the per-topic gauges as of the last pass
	// (metrics.RemoteTopicGauges).
	gauges map[string]metrics.RemoteTopicGauges
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
	ctx, cancel := context.WithTimeout(r.b.ctx, r.opTime)
	err := r.meta.sync(ctx, rps...)
	cancel()
	if err != nil {
		r.failed(nil, err)
		return
	}
	now := r.b.now()
	for i, p := range parts {
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
	r.errs++
	r.lastErr = err
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
	r.mu.Lock()
	st := r.part(p.TP)
	st.running = false
	if err == nil {
		st.failures, st.retryAt = 0, time.Time{}
	}
	r.mu.Unlock()
	if err != nil && r.b.ctx.Err() == nil {
		r.failed(&p.TP, err)
		r.b.log.Debug("remote log task", "topic", p.Topic, "partition", p.Partition, "err", err)
	}
}

// errNotLeader ends a task whose replica stopped leading (or changed
// leader epoch): the new leader's task continues from the metadata.
var errNotLeader = errors.New("remote log manager: no longer the leader")

func (r *rlm) runLeader(p *Partition) error {
	ctx, cancel := context.WithCancel(r.b.ctx)
	defer cancel()
	rp := remotePartition(p)
	ep := p.LeaderEpoch()
	if err := r.sync(ctx, rp); err != nil {
		return err
	}
	// Segments a crash or a failed copy left half done (Kafka deletes
	// such dangling segments and their objects).
	for _, s := range r.meta.cache.All(rp) {
		if s.State == remote.CopyStarted || s.State == remote.DeleteStarted {
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

// sync is meta.sync bounded by opTime.
func (r *rlm) sync(ctx context.Context, rp remote.Partition) error {
	ctx, cancel := context.WithTimeout(ctx, r.opTime)
	defer cancel()
	return r.meta.sync(ctx, rp)
}

// publish writes one metadata record bounded by opTime.
func (r *rlm) publish(ctx context.Context, rp remote.Partition, value []byte) error {
	ctx, cancel := context.WithTimeout(ctx, r.opTime)
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

// copyAll copies p's eligible segments in order, each followed by the
// owner's local retention.
func (r *rlm) copyAll(ctx context.Context, p *Partition, rp remote.Partition, ep int32) error {
	for {
		if !p.IsLeader() || p.LeaderEpoch() != ep {
			return errNotLeader
		}
		copied := r.highestCopied(rp, p)
		r.setCopied(p.TP, copied)
		p.applyLocalRetention(r.b.now(), copied)
		// Wholly below the HW and the last stable offset (Kafka copies
		// up to the LSO, so no open transaction is in the remote log).
		limit := min(p.HighWatermark(), p.LastStableOffset())
		logStart := p.LogStartOffset()
		var next *storage.SegmentInfo
		for _, s := range p.log.LocalSegments() {
			if s.Active || s.Next > limit {
				break
			}
			if s.Size > 0 && s.Next-1 > copied && s.Next > logStart {
				next = &s
				break
			}
		}
		if next == nil {
			return nil
		}
		if err := r.copySegment(ctx, p, rp, ep, *next); err != nil {
			return err
		}
		if err := r.sync(ctx, rp); err != nil {
			return err
		}
	}
}

// copySegment copies one segment: COPY_SEGMENT_STARTED, its objects,
// COPY_SEGMENT_FINISHED.
func (r *rlm) copySegment(ctx context.Context, p *Partition, rp remote.Partition, ep int32, si storage.SegmentInfo) error {
	sc, err := p.log.SegmentCopy(si.Base)
	if err != nil {
		return err
	}
	seg := remote.Segment{Partition: rp, StartOffset: sc.Base, EndOffset: sc.Next - 1, MaxTimestamp: sc.MaxTimestamp,
		BrokerID: r.b.cfg.NodeID, EventTimestamp: r.b.now().UnixMilli(), LeaderEpochs: sc.SegmentEpochs,
		SizeBytes: sc.LogSize, TxnIndexEmpty: len(sc.TxnIndex) == 0, State: remote.CopyStarted}
	if _, err := rand.Read(seg.ID[:]); err != nil {
		return err
	}
	metrics.RemoteCopyRequests.WithLabelValues(p.Topic).Inc()
	if err := r.publish(ctx, rp, remote.EncodeSegment(&seg)); err != nil {
		return fmt.Errorf("COPY_SEGMENT_STARTED of %d: %w", seg.StartOffset, err)
	}
	select {
	case r.copiers <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	err = r.upload(ctx, &seg, sc)
	<-r.copiers
	if err != nil {
		return fmt.Errorf("copying segment %d: %w", seg.StartOffset, err)
	}
	// A replica that stopped leading leaves the segment STARTED: the new
	// leader deletes it.
	if !p.IsLeader() || p.LeaderEpoch() != ep {
		return errNotLeader
	}
	u := remote.Update{Partition: rp, ID: seg.ID, BrokerID: r.b.cfg.NodeID, EventTimestamp: r.b.now().UnixMilli(), State: remote.CopyFinished}
	if err := r.publish(ctx, rp, remote.EncodeUpdate(&u)); err != nil {
		return fmt.Errorf("COPY_SEGMENT_FINISHED of %d: %w", seg.StartOffset, err)
	}
	metrics.RemoteCopyBytes.WithLabelValues(p.Topic).Add(float64(sc.LogSize))
	r.b.log.Debug("segment copied to the remote log", "topic", p.Topic, "partition", p.Partition, "start", seg.StartOffset, "end", seg.EndOffset, "bytes", sc.LogSize)
	return nil
}

// upload puts the objects of one segment (remote.FileKind).
func (r *rlm) upload(ctx context.Context, seg *remote.Segment, sc *storage.SegmentCopy) error {
	put := func(k remote.FileKind, body io.Reader, size int64) error {
		octx, cancel := context.WithTimeout(ctx, r.opTime)
		defer cancel()
		if err := r.store.Put(octx, remote.ObjectKey(r.prefix, seg, k), &quotaReader{ctx: octx, r: body, q: r.quota}, size); err != nil {
			return fmt.Errorf("put %s: %w", k.Suffix(), err)
		}
		return nil
	}
	if err := put(remote.FileLog, io.NewSectionReader(sc.Log, 0, sc.LogSize), sc.LogSize); err != nil {
		return err
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
	for _, o := range small {
		if o.k == remote.FileTxnIndex && len(o.b) == 0 {
			continue
		}
		if err := put(o.k, bytes.NewReader(o.b), int64(len(o.b))); err != nil {
			return err
		}
	}
	return nil
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
		octx, cancel := context.WithTimeout(ctx, r.opTime)
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
// whole log (remote segments plus the local segments not copied), are
// deleted; the log start is raised past them first, so no reader is sent
// to a segment being deleted.
func (r *rlm) expire(ctx context.Context, p *Partition, rp remote.Partition, ep int32) error {
	cfg := p.log.Config()
	segs := r.meta.cache.Segments(rp)
	if len(segs) == 0 {
		return nil
	}
	nowMs := r.b.now().UnixMilli()
	logStart := p.LogStartOffset()
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
	if len(dead) == 0 {
		return nil
	}
	if newStart > logStart {
		if p.LeaderEpoch() != ep {
			return errNotLeader
		}
		if err := p.AdvanceLogStart(newStart); err != nil {
			return fmt.Errorf("raising the log start to %d: %w", newStart, err)
		}
	}
	for i, s := range dead {
		if err := r.deleteSegment(ctx, p, s); err != nil {
			return err
		}
		deadBytes -= s.SizeBytes
		r.setDeleteLag(p.TP, deadBytes, int64(len(dead)-i-1))
	}
	r.setDeleteLag(p.TP, 0, 0)
	return nil
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
		if !p.IsLeader() {
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
		n, err = p.log.ApplyLocalRetention(now, copied)
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

// deleteRemoteLog deletes the remote log of p, a tiered partition this
// broker led, if its topic is gone from im (deleted, or recreated under
// the same name): in the background, RemotePartitionDeleteMetadata
// DELETE_PARTITION_MARKED and STARTED, every object under the partition's
// prefix, then DELETE_PARTITION_FINISHED (Kafka's
// RemoteLogManager.deleteRemoteLogPartition on the leader when a topic is
// deleted). A partition moved to other brokers keeps its remote log.
func (b *Broker) deleteRemoteLog(im *metadata.Image, p *Partition) {
	if b.rlm == nil || !p.log.Config().RemoteStorage {
		return
	}
	if t := im.Topics[p.Topic]; t != nil && t.ID == p.topicID {
		return
	}
	rp := remotePartition(p)
	tp := p.TP
	b.goBackground(func() {
		r := b.rlm
		// The partition's task, if running, ends at its next check of
		// the leadership (the replica is closed): wait for it, or a copy
		// it finishes would leave objects behind.
		for deadline := b.now().Add(r.opTime); r.taskRunning(tp) && b.now().Before(deadline); {
			select {
			case <-clock.After(b.clock, 10*time.Millisecond):
			case <-b.closing:
				return
			}
		}
		backoff := r.backoff
		for attempt := 0; ; attempt++ {
			err := r.deletePartition(rp)
			if err == nil {
				b.log.Info("remote log of a deleted partition deleted", "topic", rp.Topic, "partition", rp.Partition)
				return
			}
			if attempt >= 5 || b.ctx.Err() != nil {
				b.log.Warn("deleting the remote log of a deleted partition: giving up, its objects stay", "topic", rp.Topic, "partition", rp.Partition, "err", err)
				return
			}
			select {
			case <-clock.After(b.clock, backoff):
			case <-b.closing:
				return
			}
			backoff = min(2*backoff, r.maxBack)
		}
	})
}

// taskRunning reports whether tp's task is running.
func (r *rlm) taskRunning(tp TP) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.parts[tp]
	return st != nil && st.running
}

// deletePartition is one attempt at deleting rp's remote log.
func (r *rlm) deletePartition(rp remote.Partition) error {
	ctx, cancel := context.WithTimeout(r.b.ctx, 5*r.opTime)
	defer cancel()
	for _, st := range []remote.PartitionDeleteState{remote.PartitionDeleteMarked, remote.PartitionDeleteStarted} {
		d := remote.PartitionDelete{Partition: rp, BrokerID: r.b.cfg.NodeID, EventTimestamp: r.b.now().UnixMilli(), State: st}
		if err := r.publish(ctx, rp, remote.EncodePartitionDelete(&d)); err != nil {
			return err
		}
	}
	keys, err := r.store.List(ctx, remote.PartitionPrefix(r.prefix, rp))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := r.store.Delete(ctx, k); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return err
		}
	}
	d := remote.PartitionDelete{Partition: rp, BrokerID: r.b.cfg.NodeID, EventTimestamp: r.b.now().UnixMilli(), State: remote.PartitionDeleteFinished}
	if err := r.publish(ctx, rp, remote.EncodePartitionDelete(&d)); err != nil {
		return err
	}
	return r.sync(ctx, rp)
}
