package metrics

import "github.com/prometheus/client_golang/prometheus"

// The coordinator runtime's instruments (internal/coord), labelled by
// coordinator ("group", "txn"), after Kafka's CoordinatorRuntimeMetrics
// (event-queue-time-ms, event-processing-time-ms, batch sizes).
var (
	// CoordEventQueueSeconds is the time an event waited in its shard's
	// queue before its owner ran it.
	CoordEventQueueSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_coordinator_event_queue_seconds", Help: "Time a coordinator event waited in its shard's queue (event-queue-time-ms).",
		Buckets: prometheus.ExponentialBuckets(0.00001, 2, 20),
	}, []string{"coordinator"})
	// CoordEventSeconds is the time the owner spent running an event.
	CoordEventSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_coordinator_event_processing_seconds", Help: "Time a coordinator shard's owner spent running one event (event-processing-time-ms).",
		Buckets: prometheus.ExponentialBuckets(0.00001, 2, 20),
	}, []string{"coordinator"})
	// CoordBatchRecords is the number of records of each batch a
	// coordinator appended to its partition.
	CoordBatchRecords = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_coordinator_batch_records", Help: "Records per batch a coordinator appended to its partition.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	}, []string{"coordinator"})
	// CoordBatchBytes is the size of each batch a coordinator appended.
	CoordBatchBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_coordinator_batch_bytes", Help: "Bytes per batch a coordinator appended to its partition.",
		Buckets: prometheus.ExponentialBuckets(64, 2, 18),
	}, []string{"coordinator"})
	// CoordRollbacks counts writes a coordinator rolled back because
	// their append or commit failed.
	CoordRollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_coordinator_rollbacks_total", Help: "Coordinator writes rolled back after a failed append or commit.",
	}, []string{"coordinator"})
	// CoordLoadSeconds is the time a coordinator shard took to load
	// (replay its partition).
	CoordLoadSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_coordinator_load_seconds", Help: "Time to load a coordinator shard by replaying its partition (partition-load-time).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20),
	}, []string{"coordinator"})
)

func init() {
	Registry.MustRegister(CoordEventQueueSeconds, CoordEventSeconds, CoordBatchRecords, CoordBatchBytes, CoordRollbacks, CoordLoadSeconds)
}
