package metrics

import "github.com/prometheus/client_golang/prometheus"

// The security instruments (Kafka's per-listener
// successful-authentication-total and failed-authentication-total of its
// selector metrics, docs/security.md).
var (
	// TLSHandshakeFailures counts TLS handshakes that failed or timed out,
	// by listener.
	TLSHandshakeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_tls_handshake_failures_total", Help: "TLS handshakes that failed or timed out, by listener.",
	}, []string{"listener"})
	// AuthSuccesses counts successful authentications (SASL, or a TLS
	// handshake on an SSL listener), by listener
	// (successful-authentication-total).
	AuthSuccesses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_successful_authentication_total", Help: "Successful authentications (SASL, or TLS on an SSL listener), by listener (successful-authentication-total).",
	}, []string{"listener"})
	// AuthFailures counts failed SASL authentications, by listener and
	// mechanism (failed-authentication-total), and with mechanism SSL the
	// client certificates no ssl.principal.mapping.rules rule applies to.
	AuthFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_failed_authentication_total", Help: "Failed SASL authentications, by listener and mechanism (failed-authentication-total); mechanism SSL: client certificates no ssl.principal.mapping.rules rule applies to.",
	}, []string{"listener", "mechanism"})
	// Reauthentications counts successful KIP-368 re-authentications, by
	// listener (Kafka's successful-reauthentication-total).
	Reauthentications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_successful_reauthentication_total", Help: "Successful SASL re-authentications (KIP-368), by listener (successful-reauthentication-total).",
	}, []string{"listener"})
	// FailedReauthentications counts failed re-authentications, by
	// listener (failed-reauthentication-total).
	FailedReauthentications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_failed_reauthentication_total", Help: "Failed SASL re-authentications (KIP-368), by listener (failed-reauthentication-total).",
	}, []string{"listener"})
	// ExpiredSessionsClosed counts connections closed for a request after
	// their SASL session expired (expired-connections-killed-count).
	ExpiredSessionsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_expired_connections_killed_total", Help: "Connections closed because they sent a request after their SASL session expired (KIP-368, expired-connections-killed-count), by listener.",
	}, []string{"listener"})
)

func init() {
	Registry.MustRegister(TLSHandshakeFailures, AuthSuccesses, AuthFailures, Reauthentications, FailedReauthentications, ExpiredSessionsClosed)
}
