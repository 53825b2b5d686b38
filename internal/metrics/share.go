package metrics

import "github.com/prometheus/client_golang/prometheus"

// The share groups' dead-letter writer (KIP-1191,
// internal/handler/share_deadletter.go), after Kafka's ShareGroupMetrics
// DeadLetterQueueRecordCount and DeadLetterQueueTotalProduceRequestsPerSec.
var (
	// ShareDLQRecords counts the records the dead-letter writer handled,
	// by outcome: written (copied to the dead-letter topic), failed (the
	// checks or the retries failed) and dropped (the queue was full); the
	// failed and dropped ones were archived without a copy.
	ShareDLQRecords = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_share_dlq_records_total", Help: "Share-group records handled by the dead-letter writer, by outcome: written, failed, dropped (DeadLetterQueueRecordCount).",
	}, []string{"outcome"})
	// ShareDLQProduces counts the produce requests that wrote
	// dead-letter records.
	ShareDLQProduces = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_share_dlq_produces_total", Help: "Produce requests that wrote share-group dead-letter records (DeadLetterQueueTotalProduceRequestsPerSec).",
	})
)

func init() {
	Registry.MustRegister(ShareDLQRecords, ShareDLQProduces)
}
