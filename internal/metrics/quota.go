package metrics

import "github.com/prometheus/client_golang/prometheus"

// The connection-limit and client-quota instruments (Kafka's
// SocketServer connection-count, connection-creation-total and
// connection-accept-throttle-time, and ClientQuotaManager's throttle-time;
// docs/security.md, "Connection limits and quotas").
var (
	// Connections is the number of open client connections
	// (connection-count).
	Connections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_connections", Help: "Open client connections (connection-count).",
	})
	// ConnectionsAccepted counts accepted connections, by listener
	// (connection-creation-total).
	ConnectionsAccepted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_connections_accepted_total", Help: "Connections accepted, by listener (connection-creation-total).",
	}, []string{"listener"})
	// ConnectionsRejected counts connections closed at accept, by the
	// limit that refused them: max.connections or max.connections.per.ip.
	ConnectionsRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_connections_rejected_total", Help: "Connections closed at accept by a connection limit (max.connections, max.connections.per.ip).",
	}, []string{"limit"})
	// ConnectionAcceptThrottle is the time acceptors waited for
	// max.connection.creation.rate (connection-accept-throttle-time).
	ConnectionAcceptThrottle = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_connection_accept_throttle_seconds_total", Help: "Time the acceptors waited for max.connection.creation.rate (connection-accept-throttle-time).",
	})
	// QuotaThrottle is the throttle time given to clients over a client
	// quota, by quota type: produce, fetch or request (throttle-time;
	// request is request_percentage, KIP-124).
	QuotaThrottle = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_quota_throttle_seconds_total", Help: "Throttle time given to clients over a client quota, by type (produce, fetch, request).",
	}, []string{"type"})
	// QuotaBytes counts bytes recorded against client quotas, by type.
	QuotaBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_quota_bytes_total", Help: "Bytes recorded against client quotas (byte-rate), by type (produce, fetch).",
	}, []string{"type"})
	// ReplicationThrottledBytes counts the bytes of throttled replicas
	// (KIP-73) recorded against leader.replication.throttled.rate or
	// follower.replication.throttled.rate, by side (leader, follower).
	ReplicationThrottledBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_replication_throttled_bytes_total", Help: "Bytes of throttled replicas recorded against the replication throttle, by side (leader, follower).",
	}, []string{"side"})
	// ReplicationThrottledRate is the measured rate of those bytes
	// (Kafka's LeaderReplication / FollowerReplication byte-rate).
	ReplicationThrottledRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_replication_throttled_rate_bytes", Help: "Measured byte rate of throttled replicas over the replication quota window, by side (leader, follower).",
	}, []string{"side"})
	// ReplicationThrottledSkips counts throttled partitions held back
	// while the rate was over the bound: left without records in a
	// follower's fetch (leader), or out of a fetch request (follower).
	ReplicationThrottledSkips = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_replication_throttled_partitions_total", Help: "Throttled partitions held back by the replication throttle, by side (leader, follower).",
	}, []string{"side"})
)

func init() {
	Registry.MustRegister(Connections, ConnectionsAccepted, ConnectionsRejected, ConnectionAcceptThrottle, QuotaThrottle, QuotaBytes,
		ReplicationThrottledBytes, ReplicationThrottledRate, ReplicationThrottledSkips)
}
