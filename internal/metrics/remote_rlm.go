package metrics

import "github.com/prometheus/client_golang/prometheus"

// The remote log manager's instruments (tiered storage, KIP-405; Kafka's
// RemoteLogManager metrics RemoteCopyBytesPerSec, RemoteCopyErrorsPerSec,
// RemoteCopyLagBytes and RemoteCopyLagSegments; docs/tiered-storage.md).
var (
	// RemoteCopyBytes counts the segment bytes copied to the remote log
	// (RemoteCopyBytesPerSec).
	RemoteCopyBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_remote_copy_bytes_total", Help: "Segment bytes copied to the remote log (RemoteCopyBytesPerSec).",
	})
	// RemoteCopyErrors counts failed remote log tasks: copies, deletions,
	// metadata reads and writes (RemoteCopyErrorsPerSec).
	RemoteCopyErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_remote_copy_errors_total", Help: "Failed remote log manager tasks: copies, deletions, metadata reads and writes (RemoteCopyErrorsPerSec).",
	})
	// RemoteCopyLagBytes is the size of the rolled segments of the
	// partitions led here not yet copied to the remote log
	// (RemoteCopyLagBytes): the local disk holds them whatever
	// local.retention.* says.
	RemoteCopyLagBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_remote_copy_lag_bytes", Help: "Bytes of rolled segments not yet copied to the remote log, on the partitions led here (RemoteCopyLagBytes).",
	})
	// RemoteCopyLagSegments is the number of those segments
	// (RemoteCopyLagSegments).
	RemoteCopyLagSegments = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_remote_copy_lag_segments", Help: "Rolled segments not yet copied to the remote log, on the partitions led here (RemoteCopyLagSegments).",
	})
)

func init() {
	Registry.MustRegister(RemoteCopyBytes, RemoteCopyErrors, RemoteCopyLagBytes, RemoteCopyLagSegments)
}
