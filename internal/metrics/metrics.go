// Package metrics holds sluice's Prometheus instruments. They are process
// globals registered in Registry, which the HTTP status server exposes on
// /metrics; names follow Kafka's JMX metrics where one exists.
package metrics

import (
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
	// LeaderElections counts leader changes this node applied from metadata
	// (LeaderElectionRateAndTimeMs).
	LeaderElections = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_leader_elections_total", Help: "Leader changes of local partitions applied from committed metadata (LeaderElectionRateAndTimeMs).",
	})
)

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		Requests, RequestSeconds, ISRShrinks, ISRExpands, LeaderElections)
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
