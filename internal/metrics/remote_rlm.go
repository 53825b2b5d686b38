package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The tiered storage instruments (KIP-405), after Kafka's
// RemoteStorageMetrics: the per-topic BrokerTopicMetrics ones
// (RemoteCopyBytesPerSec, RemoteFetchBytesPerSec, RemoteCopyRequestsPerSec,
// RemoteFetchRequestsPerSec, RemoteDeleteRequestsPerSec,
// RemoteCopyErrorsPerSec, RemoteFetchErrorsPerSec, RemoteDeleteErrorsPerSec,
// RemoteCopyLagBytes, RemoteCopyLagSegments, RemoteDeleteLagBytes,
// RemoteDeleteLagSegments, RemoteLogSizeBytes, RemoteLogMetadataCount) with
// a topic label (Kafka's all-topics value is their sum), and the
// RemoteLogReader thread pool's TaskQueueSize and AvgIdlePercent
// (docs/tiered-storage.md, "Metrics").
var (
	// RemoteCopyBytes counts the segment bytes copied to the remote log,
	// by topic (RemoteCopyBytesPerSec).
	RemoteCopyBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_remote_copy_bytes_total", Help: "Segment bytes copied to the remote log, by topic (RemoteCopyBytesPerSec).",
	}, []string{"topic"})
	// RemoteCopyRequests counts the segment copies started, by topic
	// (RemoteCopyRequestsPerSec).
	RemoteCopyRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_remote_copy_requests_total", Help: "Segment copies to the remote log started, by topic (RemoteCopyRequestsPerSec).",
	}, []string{"topic"})
	// RemoteCopyErrors counts failed remote log tasks by topic: copies,
	// deletions, metadata reads and writes; a failure not of one
	// partition (the metadata topic, a sync of every partition) has topic
	// "" (RemoteCopyErrorsPerSec).
	RemoteCopyErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_remote_copy_errors_total", Help: "Failed remote log manager tasks (copies, deletions, metadata reads and writes), by topic; topic \"\" for failures not of one partition (RemoteCopyErrorsPerSec).",
	}, []string{"topic"})
	// RemoteFetchBytes counts the record bytes read from the remote log
	// for consumers and share groups, by topic (RemoteFetchBytesPerSec).
	RemoteFetchBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_remote_fetch_bytes_total", Help: "Record bytes read from the remote log for fetches, by topic (RemoteFetchBytesPerSec).",
	}, []string{"topic"})
	// RemoteFetchRequests counts the reads of the remote log (one per
	// partition of a fetch), by topic (RemoteFetchRequestsPerSec).
	RemoteFetchRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_remote_fetch_requests_total", Help: "Reads of the remote log, one per partition of a fetch, by topic (RemoteFetchRequestsPerSec).",
	}, []string{"topic"})
	// RemoteFetchErrors counts the failed ones (RemoteFetchErrorsPerSec).
	RemoteFetchErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_remote_fetch_errors_total", Help: "Failed reads of the remote log, by topic (RemoteFetchErrorsPerSec).",
	}, []string{"topic"})
	// RemoteFetchThrottled counts the partitions of fetches left without
	// remote data because remote.log.manager.fetch.max.bytes.per.second
	// was exceeded (KIP-956).
	RemoteFetchThrottled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_remote_fetch_throttled_total", Help: "Partitions of fetches answered without remote data because remote.log.manager.fetch.max.bytes.per.second was exceeded, by topic (KIP-956).",
	}, []string{"topic"})
	// RemoteDeleteRequests counts the remote segments whose deletion
	// started, by topic (RemoteDeleteRequestsPerSec).
	RemoteDeleteRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_remote_delete_requests_total", Help: "Remote segment deletions started, by topic (RemoteDeleteRequestsPerSec).",
	}, []string{"topic"})
	// RemoteDeleteErrors counts the failed ones (RemoteDeleteErrorsPerSec).
	RemoteDeleteErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_remote_delete_errors_total", Help: "Failed remote segment deletions, by topic (RemoteDeleteErrorsPerSec).",
	}, []string{"topic"})
)

// ForgetRemoteTopic removes topic's series from the per-topic tiered
// storage counters, once the topic is deleted (Kafka's
// BrokerTopicStats.removeMetrics): a cluster that creates and deletes
// topics does not grow its metrics without bound. A topic recreated
// under the name counts from zero.
func ForgetRemoteTopic(topic string) {
	for _, v := range []*prometheus.CounterVec{RemoteCopyBytes, RemoteCopyRequests, RemoteCopyErrors,
		RemoteFetchBytes, RemoteFetchRequests, RemoteFetchErrors, RemoteFetchThrottled,
		RemoteDeleteRequests, RemoteDeleteErrors} {
		v.DeleteLabelValues(topic)
	}
}

// RemoteTopicGauges are a topic's tiered storage gauges on one broker,
// over the partitions it leads.
type RemoteTopicGauges struct {
	// CopyLagBytes and CopyLagSegments: rolled segments not yet copied
	// (RemoteCopyLagBytes, RemoteCopyLagSegments).
	CopyLagBytes, CopyLagSegments int64
	// DeleteLagBytes and DeleteLagSegments: remote segments expired by
	// retention but not yet deleted (RemoteDeleteLagBytes,
	// RemoteDeleteLagSegments).
	DeleteLagBytes, DeleteLagSegments int64
	// SizeBytes is the size of the remote log (RemoteLogSizeBytes).
	SizeBytes int64
	// MetadataCount is the number of remote segment metadata entries, in
	// any state (RemoteLogMetadataCount).
	MetadataCount int64
}

// RemoteReaderPool is the state of one broker's remote log reader pool.
type RemoteReaderPool struct {
	// Queued is the reads waiting for a goroutine (TaskQueueSize).
	Queued int
	// Busy and Threads are the goroutines reading and their number.
	Busy, Threads int
}

// remoteSources are the registered brokers' gauge sources; the collector
// adds them up (several brokers run in one process in tests).
var remoteSources struct {
	mu     sync.Mutex
	next   int
	topics map[int]func() map[string]RemoteTopicGauges
	pools  map[int]func() RemoteReaderPool
}

// AddRemoteGauges registers a broker's sources of the tiered storage
// gauges (either may be nil); the returned function unregisters them.
func AddRemoteGauges(topics func() map[string]RemoteTopicGauges, pool func() RemoteReaderPool) (remove func()) {
	s := &remoteSources
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.topics == nil {
		s.topics, s.pools = map[int]func() map[string]RemoteTopicGauges{}, map[int]func() RemoteReaderPool{}
	}
	id := s.next
	s.next++
	if topics != nil {
		s.topics[id] = topics
	}
	if pool != nil {
		s.pools[id] = pool
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.topics, id)
		delete(s.pools, id)
	}
}

// remoteCollector exposes the gauges of the registered sources.
type remoteCollector struct {
	copyLagBytes, copyLagSegs, delLagBytes, delLagSegs, size, count *prometheus.Desc
	queue, idle                                                     *prometheus.Desc
}

var remoteGauges = &remoteCollector{
	copyLagBytes: prometheus.NewDesc("sluice_remote_copy_lag_bytes", "Bytes of rolled segments not yet copied to the remote log, on the partitions led here, by topic (RemoteCopyLagBytes).", []string{"topic"}, nil),
	copyLagSegs:  prometheus.NewDesc("sluice_remote_copy_lag_segments", "Rolled segments not yet copied to the remote log, on the partitions led here, by topic (RemoteCopyLagSegments).", []string{"topic"}, nil),
	delLagBytes:  prometheus.NewDesc("sluice_remote_delete_lag_bytes", "Bytes of remote segments past retention not yet deleted, on the partitions led here, by topic (RemoteDeleteLagBytes).", []string{"topic"}, nil),
	delLagSegs:   prometheus.NewDesc("sluice_remote_delete_lag_segments", "Remote segments past retention not yet deleted, on the partitions led here, by topic (RemoteDeleteLagSegments).", []string{"topic"}, nil),
	size:         prometheus.NewDesc("sluice_remote_log_size_bytes", "Size of the remote log (readable segments) of the partitions led here, by topic (RemoteLogSizeBytes).", []string{"topic"}, nil),
	count:        prometheus.NewDesc("sluice_remote_log_metadata_count", "Remote segment metadata entries, in any state, of the partitions led here, by topic (RemoteLogMetadataCount).", []string{"topic"}, nil),
	queue:        prometheus.NewDesc("sluice_remote_log_reader_task_queue_size", "Remote log reads waiting for a reader goroutine (RemoteLogReader TaskQueueSize).", nil, nil),
	idle:         prometheus.NewDesc("sluice_remote_log_reader_avg_idle_ratio", "Share of the remote log reader goroutines not reading now, 0 to 1 (RemoteLogReader AvgIdlePercent, which Kafka also reports as a fraction).", nil, nil),
}

// Describe implements prometheus.Collector.
func (c *remoteCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.copyLagBytes, c.copyLagSegs, c.delLagBytes, c.delLagSegs, c.size, c.count, c.queue, c.idle} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *remoteCollector) Collect(ch chan<- prometheus.Metric) {
	s := &remoteSources
	s.mu.Lock()
	topics := make([]func() map[string]RemoteTopicGauges, 0, len(s.topics))
	for _, fn := range s.topics {
		topics = append(topics, fn)
	}
	pools := make([]func() RemoteReaderPool, 0, len(s.pools))
	for _, fn := range s.pools {
		pools = append(pools, fn)
	}
	s.mu.Unlock()
	sum := map[string]RemoteTopicGauges{}
	for _, fn := range topics {
		for t, g := range fn() {
			a := sum[t]
			a.CopyLagBytes += g.CopyLagBytes
			a.CopyLagSegments += g.CopyLagSegments
			a.DeleteLagBytes += g.DeleteLagBytes
			a.DeleteLagSegments += g.DeleteLagSegments
			a.SizeBytes += g.SizeBytes
			a.MetadataCount += g.MetadataCount
			sum[t] = a
		}
	}
	for t, g := range sum {
		for _, v := range []struct {
			d *prometheus.Desc
			n int64
		}{{c.copyLagBytes, g.CopyLagBytes}, {c.copyLagSegs, g.CopyLagSegments}, {c.delLagBytes, g.DeleteLagBytes},
			{c.delLagSegs, g.DeleteLagSegments}, {c.size, g.SizeBytes}, {c.count, g.MetadataCount}} {
			ch <- prometheus.MustNewConstMetric(v.d, prometheus.GaugeValue, float64(v.n), t)
		}
	}
	if len(pools) == 0 {
		return
	}
	var p RemoteReaderPool
	for _, fn := range pools {
		q := fn()
		p.Queued += q.Queued
		p.Busy += q.Busy
		p.Threads += q.Threads
	}
	idle := 1.0
	if p.Threads > 0 {
		idle = 1 - float64(p.Busy)/float64(p.Threads)
	}
	ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(p.Queued))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, idle)
}

func init() {
	Registry.MustRegister(RemoteCopyBytes, RemoteCopyRequests, RemoteCopyErrors, RemoteFetchBytes, RemoteFetchRequests,
		RemoteFetchErrors, RemoteFetchThrottled, RemoteDeleteRequests, RemoteDeleteErrors, remoteGauges)
}
