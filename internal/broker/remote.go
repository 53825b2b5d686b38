package broker

import (
	"context"
	"errors"
	"path"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/storage"
)

// Reads from the remote log (tiered storage, KIP-405; docs/tiered-storage.md,
// "Reads"). A consumer fetch below a partition's local log start is served
// by the remote reader (remote.Reader, Kafka's RemoteLogManager.read) on a
// bounded pool of remote.log.reader.threads goroutines with a queue of
// remote.log.reader.max.pending.tasks (Kafka's RemoteLogReader thread pool,
// RemoteStorageThreadPool), never on the partition's owner.

// ErrRemoteQueueFull is returned by SubmitRemoteRead when
// remote.log.reader.max.pending.tasks reads are already waiting (Kafka's
// RejectedExecutionException, which the fetch answers for that partition).
var ErrRemoteQueueFull = errors.New("broker: remote log reader queue full")

// ErrNoRemoteStorage is returned by SubmitRemoteRead on a broker without a
// remote store.
var ErrNoRemoteStorage = errors.New("broker: remote storage is not configured")

// ErrRemoteMetadataNotRead is returned by Partition.RemoteReadable while
// the broker has not read the partition's remote log metadata since it
// started, and by a remote read of an offset between the log start and
// the local log start that the metadata read so far holds in no segment:
// the remote log there is not known yet, so the read must be retried
// rather than answered OFFSET_OUT_OF_RANGE (Kafka answers
// REPLICA_NOT_AVAILABLE while its metadata cache is not initialized).
var ErrRemoteMetadataNotRead = errors.New("broker: remote log metadata not read yet")

// remoteReads is the remote reader and its pool.
type remoteReads struct {
	reader  *remote.Reader
	tasks   chan func(context.Context)
	threads int
	// isRead reports whether the metadata holds a partition's remote log
	// (remoteMeta.isRead; nil: always, with Options.RemoteMetadata).
	isRead func(remote.Partition) bool
	busy   atomic.Int64 // goroutines running a read
	// quota is remote.log.manager.fetch.max.bytes.per.second (nil:
	// unlimited).
	quota *sampledRate
}

// startRemote makes the remote reader from the options and starts its
// pool (none without Options.RemoteStore and Options.RemoteMetadata).
func (b *Broker) startRemote(opts Options) {
	md := opts.RemoteMetadata
	if md == nil && b.rlm != nil {
		md = b.RemoteMetadata() // the __remote_log_metadata store (rlmstore.go)
	}
	if opts.RemoteStore == nil || md == nil {
		return
	}
	prefix, _ := b.cfg.Get("sluice.remote.storage.prefix")
	rr := &remoteReads{
		reader: remote.NewReader(opts.RemoteStore, md, remote.ReaderConfig{
			Prefix:          prefix,
			IndexCacheBytes: b.cfg.Int("remote.log.index.file.cache.total.size.bytes", 1<<30),
			IndexCacheDir:   path.Join(b.cfg.DataDir, remote.IndexCacheDirName),
			FS:              b.fs,
		}),
		tasks: make(chan func(context.Context), b.cfg.Int("remote.log.reader.max.pending.tasks", 100)),
	}
	if opts.RemoteMetadata == nil {
		rr.isRead = b.rlm.meta.isRead
	}
	b.remote = rr
	if err := rr.reader.IndexCacheErr(); err != nil {
		b.log.Warn("remote index cache on disk unavailable: remote indexes are cached in memory only", "dir", path.Join(b.cfg.DataDir, remote.IndexCacheDirName), "err", err)
	}
	if rate := b.cfg.Int("remote.log.manager.fetch.max.bytes.per.second", 1<<63-1); rate < unlimited {
		rr.quota = newSampledRate(b.clock, float64(rate), int(b.cfg.Int("remote.log.manager.fetch.quota.window.num", 11)),
			time.Duration(b.cfg.Int("remote.log.manager.fetch.quota.window.size.seconds", 1))*time.Second)
	}
	if b.steps {
		// Step mode: no pool (SubmitRemoteRead runs each read at once)
		// and no gauges, whose removal waits for Close: a simulated
		// crash drops the broker without one.
		return
	}
	threads := int(b.cfg.Int("remote.log.reader.threads", 10))
	rr.threads = threads
	b.wg.Add(threads + 1)
	for range threads {
		go func() {
			defer b.wg.Done()
			for {
				select {
				case <-b.ctx.Done():
					return
				case fn := <-rr.tasks:
					rr.busy.Add(1)
					fn(b.ctx)
					rr.busy.Add(-1)
				}
			}
		}()
	}
	var topics func() map[string]metrics.RemoteTopicGauges
	if b.rlm != nil {
		topics = b.rlm.topicGauges
	}
	remove := metrics.AddRemoteGauges(topics, func() metrics.RemoteReaderPool {
		return metrics.RemoteReaderPool{Queued: len(rr.tasks), Busy: int(rr.busy.Load()), Threads: rr.threads}
	})
	go func() {
		defer b.wg.Done()
		<-b.ctx.Done()
		remove()
	}()
}

// RemoteFetchThrottled reports whether remote reads are over
// remote.log.manager.fetch.max.bytes.per.second (Kafka's
// RemoteLogManager.getFetchThrottleTimeMs() > 0, KIP-956): a consumer
// fetch then gets no remote data for its partitions below the local log
// start this time (no error, no throttle time: it fetches again), and the
// rest of the fetch is answered as usual (ReplicaManager's
// handleOffsetOutOfRangeError). It counts one throttled partition of
// topic in sluice_remote_fetch_throttled_total when it answers true.
func (b *Broker) RemoteFetchThrottled(topic string) bool {
	if b.remote == nil || b.remote.quota == nil || !b.remote.quota.exceeded() {
		return false
	}
	metrics.RemoteFetchThrottled.WithLabelValues(topic).Inc()
	return true
}

// RemoteReadDone records one read of the remote log of topic that
// returned n bytes or failed with err: the metrics (RemoteFetchRequestsPerSec,
// RemoteFetchBytesPerSec, RemoteFetchErrorsPerSec) and the bytes against
// the remote fetch quota (as Kafka's RemoteLogReader records them once
// read).
func (b *Broker) RemoteReadDone(topic string, n int, err error) {
	metrics.RemoteFetchRequests.WithLabelValues(topic).Inc()
	if err != nil {
		metrics.RemoteFetchErrors.WithLabelValues(topic).Inc()
		return
	}
	metrics.RemoteFetchBytes.WithLabelValues(topic).Add(float64(n))
	if b.remote != nil && b.remote.quota != nil {
		b.remote.quota.record(int64(n))
	}
}

// RemoteReader is the reader of the remote log, nil without remote
// storage.
func (b *Broker) RemoteReader() *remote.Reader {
	if b.remote == nil {
		return nil
	}
	return b.remote.reader
}

// SubmitRemoteRead queues fn on the remote reader pool. fn runs with a
// context cancelled when the broker closes; a read queued when the broker
// closes does not run. It fails at once with ErrRemoteQueueFull when the
// queue is full. In step mode fn runs before it returns.
func (b *Broker) SubmitRemoteRead(fn func(ctx context.Context)) error {
	if b.remote == nil {
		return ErrNoRemoteStorage
	}
	if b.steps {
		// Step mode: the read runs on the caller's goroutine.
		fn(b.ctx)
		return nil
	}
	select {
	case b.remote.tasks <- fn:
		return nil
	default:
		return ErrRemoteQueueFull
	}
}

// RemotePartition names p in the remote log (its topic id from the
// metadata this node applied).
func (p *Partition) RemotePartition() remote.Partition {
	id, _ := p.b.TopicID(p.Topic)
	return remote.Partition{TopicID: id, Topic: p.Topic, Partition: p.TP.Partition}
}

// RemoteReadable returns ErrRemoteMetadataNotRead while the remote log
// metadata this broker reads p's remote log by has not been read since it
// started (the remote log manager reads it on each pass), nil otherwise.
func (p *Partition) RemoteReadable() error {
	if rr := p.b.remote; rr != nil && rr.isRead != nil && !rr.isRead(p.RemotePartition()) {
		return ErrRemoteMetadataNotRead
	}
	return nil
}

// RemoteStorage reports whether p's topic has remote.storage.enable.
func (p *Partition) RemoteStorage() bool { return p.log.Config().RemoteStorage }

// tieredFetch answers a fetch whose offset is below the local log start
// (storage.ErrOffsetTiered), as Kafka's
// ReplicaManager.handleOffsetOutOfRangeError does: a follower gets
// OFFSET_MOVED_TO_TIERED_STORAGE when the topic has remote storage (it
// rebuilds from the remote log, fetcher.go), a consumer is read from the
// remote log by the caller (the error is passed on), and without remote
// storage either gets OFFSET_OUT_OF_RANGE.
func (p *Partition) tieredFetch(req replica.FetchRequest, res replica.FetchResult) (replica.FetchResult, storage.Slice, error) {
	switch {
	case !p.RemoteStorage():
		res.Error = kerr.OffsetOutOfRange.Code
	case req.ReplicaID >= 0:
		res.Error = kerr.OffsetMovedToTieredStorage.Code
	case p.b.remote == nil:
		res.Error = kerr.OffsetOutOfRange.Code
	default:
		return res, storage.Slice{}, storage.ErrOffsetTiered
	}
	return res, storage.Slice{}, nil
}

// rebuildFromRemote is the follower's side of OFFSET_MOVED_TO_TIERED_STORAGE
// (Kafka's ReplicaFetcherTierStateMachine.start, on the fetcher as there):
// it asks the leader for its earliest local offset and log start
// (ListOffsets -4 and -2), reads the leader-epoch checkpoint and producer
// snapshot of the remote segment holding the offset just below that
// local start, and hands them to the machine (replica.HandleRemoteAux),
// which restarts the log at the leader's local start. It reports whether
// the machine did.
func (f *fetcher) rebuildFromRemote(ctx context.Context, p *Partition, req replica.FetchRequest) (bool, error) {
	rr := f.b.RemoteReader()
	if rr == nil {
		return false, ErrNoRemoteStorage
	}
	localStart, localEpoch, logStart, err := f.earliestLocal(ctx, p.TP, req.CurrentLeaderEpoch)
	if err != nil {
		return false, err
	}
	if localStart <= req.FetchOffset {
		return false, nil // the leader's local log holds it now: fetch again
	}
	if err := p.RemoteReadable(); err != nil {
		return false, err
	}
	aux, err := rr.Aux(ctx, p.RemotePartition(), localStart-1, localEpoch)
	if err != nil {
		return false, err
	}
	var ok bool
	p.do(func() {
		if !p.closed {
			ok = p.r.HandleRemoteAux(req, replica.RemoteAux{LocalStart: localStart, LogStart: logStart, Epochs: aux.Epochs, Producers: aux.Producers})
		}
	})
	if ok {
		f.b.log.Info("follower rebuilt its log from the remote log", "topic", p.Topic, "partition", p.TP.Partition,
			"local_start", localStart, "log_start", logStart, "remote_segment_start", aux.Segment.StartOffset, "remote_segment_end", aux.Segment.EndOffset)
	}
	return ok, nil
}

// earliestLocal asks the leader for its local log start with its leader
// epoch (ListOffsets -4, v8) and its log start (-2), as a replica.
func (f *fetcher) earliestLocal(ctx context.Context, tp TP, leaderEpoch int32) (localStart int64, localEpoch int32, logStart int64, err error) {
	ps, err := f.replicaListOffsets(ctx, tp, leaderEpoch, 8, -4, -2)
	if err != nil {
		return 0, 0, 0, err
	}
	return ps[0].Offset, ps[0].LeaderEpoch, ps[1].Offset, nil
}
