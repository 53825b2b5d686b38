// Package metrics holds sluice's Prometheus instruments. They are process
// globals registered in Registry, which the HTTP status server exposes on
// /metrics; names follow Kafka's JMX metrics where one exists.
package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Registry holds every sluice metric plus the Go and process collectors.
var Registry = prometheus.NewRegistry()

var (
	// Requests counts requests by API (Kafka's RequestsPerSec).
	Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_requests_total", Help: "Kafka requests served, by API (RequestsPerSec).",
	}, []string{"api"})
	// RequestSeconds is the time from a request's arrival to its response
	// being written, by API (TotalTimeMs).
	RequestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_request_duration_seconds", Help: "Time from request arrival to response written, by API (TotalTimeMs).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"api"})
	// ISRShrinks counts committed ISR shrinks of partitions led here
	// (IsrShrinksPerSec).
	ISRShrinks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_isr_shrinks_total", Help: "Committed ISR shrinks of partitions led by this node (IsrShrinksPerSec).",
	})
	// ISRExpands counts committed ISR expansions (IsrExpandsPerSec).
	ISRExpands = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_isr_expands_total", Help: "Committed ISR expansions of partitions led by this node (IsrExpandsPerSec).",
	})
	// ControllerEntries and ControllerRecords count the raft entries
	// (commits) and metadata records this node wrote as the active
	// controller (docs/controller.md, "Batching and limits").
	ControllerEntries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_controller_metadata_entries_total", Help: "Raft entries (commits) of metadata written by this node as the active controller.",
	})
	ControllerRecords = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_controller_metadata_records_total", Help: "Metadata records written by this node as the active controller.",
	})
	// LeaderElections counts leader changes this node applied from metadata
	// (LeaderElectionRateAndTimeMs).
	LeaderElections = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_leader_elections_total", Help: "Leader changes of local partitions applied from committed metadata (LeaderElectionRateAndTimeMs).",
	})
	// StrayReplicasSetAside counts partition directories this node set
	// aside as strays (renamed topic-N.ID-stray, never deleted) since it
	// started.
	StrayReplicasSetAside = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_stray_replicas_set_aside_total", Help: "Partition directories the metadata does not know, renamed aside with the -stray suffix (never deleted) since start.",
	})
)

// The log cleaner's instruments (Kafka's LogCleaner and
// LogCleanerManager metrics).
var (
	// CleanerMaxDirtyPercent is the highest dirty ratio among compacted
	// logs, in percent (max-dirty-percent).
	CleanerMaxDirtyPercent = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_log_cleaner_max_dirty_percent", Help: "Highest dirty ratio of a compacted log, percent (max-dirty-percent).",
	})
	// CleanerSinceLastRun is the time since a cleaning pass last ended
	// (time-since-last-run-ms).
	CleanerSinceLastRun = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_log_cleaner_time_since_last_run_ms", Help: "Milliseconds since the log cleaner last finished a pass (time-since-last-run-ms).",
	})
	// CleanerReadBytes and CleanerWrittenBytes count the bytes the cleaner
	// read (offset map and rewrite) and wrote.
	CleanerReadBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_log_cleaner_read_bytes_total", Help: "Bytes the log cleaner read.",
	})
	CleanerWrittenBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_log_cleaner_written_bytes_total", Help: "Bytes the log cleaner wrote (cleaned segments).",
	})
	// CleanerRecordsRemoved counts records compaction removed.
	CleanerRecordsRemoved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_log_cleaner_records_removed_total", Help: "Records removed by compaction.",
	})
	// CleanerPasses counts completed cleaning passes.
	CleanerPasses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_log_cleaner_passes_total", Help: "Completed log cleaning passes.",
	})
	// CleanerBacklogBytes and CleanerBacklogPartitions are the dirty bytes
	// and the number of compacted logs due for cleaning.
	CleanerBacklogBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_log_cleaner_backlog_bytes", Help: "Dirty bytes of the compacted logs due for cleaning.",
	})
	CleanerBacklogPartitions = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_log_cleaner_backlog_partitions", Help: "Compacted logs due for cleaning.",
	})
	// CleanerRunning is the number of cleaning passes in progress.
	CleanerRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_log_cleaner_running_passes", Help: "Log cleaning passes in progress.",
	})
	// CleanerBufferBytes is the memory held by the cleaner's offset maps
	// (bounded by log.cleaner.dedupe.buffer.size).
	CleanerBufferBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_log_cleaner_buffer_bytes", Help: "Memory held by the log cleaner's offset maps (log.cleaner.dedupe.buffer.size bounds it).",
	})
)

// FetchSplicedBytes counts record bytes sent to fetchers straight from the
// log files (sendfile) instead of copied into responses.
var FetchSplicedBytes = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "sluice_fetch_spliced_bytes_total", Help: "Fetched record bytes sent from the log files without a copy (zero-copy fetch).",
})

// FlushRounds counts the flush workers' rounds by kind: "fsync" (one
// partition's log, storage.Log.Sync) or "syncfs" (many partitions' logs,
// one syncfs of the data directory's filesystem); FlushPartitions counts
// the partition rounds they covered (equal to FlushRounds for fsync).
var (
	FlushRounds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_log_flush_rounds_total", Help: "Flush rounds of the flush workers, by kind: fsync (one partition) or syncfs (many partitions, one syncfs of the data directory's filesystem).",
	}, []string{"kind"})
	FlushPartitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_log_flush_partitions_total", Help: "Partition logs made durable by the flush workers' rounds, by kind of round (fsync, syncfs).",
	}, []string{"kind"})
)

// OpenFiles reports the segment and index files held open (the
// log.max.open.files cache); set by the broker process at startup.
var openFiles = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
	Name: "sluice_log_open_files", Help: "Segment and index files holding a descriptor now (log.max.open.files bounds it, softly).",
}, func() float64 {
	if fn := openFilesFn.Load(); fn != nil {
		return float64((*fn)())
	}
	return 0
})

var openFilesFn atomic.Pointer[func() int]

// SetOpenFiles sets the function the sluice_log_open_files gauge reads.
func SetOpenFiles(fn func() int) { openFilesFn.Store(&fn) }

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		Requests, RequestSeconds, ISRShrinks, ISRExpands, LeaderElections, StrayReplicasSetAside, ControllerEntries, ControllerRecords,
		CleanerMaxDirtyPercent, CleanerSinceLastRun, CleanerReadBytes, CleanerWrittenBytes, CleanerRecordsRemoved,
		CleanerPasses, CleanerBacklogBytes, CleanerBacklogPartitions, CleanerBufferBytes, CleanerRunning, openFiles, FetchSplicedBytes,
		FlushRounds, FlushPartitions)
}

var apiNames = func() [100]string {
	var n [100]string
	for i := range n {
		n[i] = kmsg.NameForKey(int16(i))
	}
	return n
}()

// ObserveRequest records one served request.
func ObserveRequest(key int16, d time.Duration) {
	name := "Unknown"
	if key >= 0 && int(key) < len(apiNames) && apiNames[key] != "" {
		name = apiNames[key]
	}
	Requests.WithLabelValues(name).Inc()
	RequestSeconds.WithLabelValues(name).Observe(d.Seconds())
}
