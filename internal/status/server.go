package status

import (
	"bytes"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"html/template"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/share"
)

// Options configure a Server.
type Options struct {
	Broker *broker.Broker
	// Groups lists the consumer groups this node coordinates (nil: none).
	Groups func() []group.Summary
	// SharePartitions lists the share partitions loaded on this node, the
	// leader of their partitions (nil: none).
	SharePartitions func(now time.Time) []share.PartitionStatus
	// Transactions lists the open transactions this node coordinates
	// (OpenTransactions; nil: none).
	Transactions func() []Transaction
	// Version is the binary's version, shown per broker.
	Version string
	// PeerTimeout bounds each fetch of another broker's view (default
	// 800 ms): a broker that does not answer within it is unreachable.
	PeerTimeout time.Duration
	// Debug serves the Go profiles at /debug/pprof/
	// (sluice.http.debug.enable); off, they do not exist.
	Debug bool
	// PeerTLS, when set, fetches the other brokers' /api/v1/node over
	// https with this client configuration (sluice.http.ssl.enable: the
	// cluster's nodes share their HTTP settings).
	PeerTLS *tls.Config
	// PeerToken, when set, returns the bearer token sent to the other
	// brokers (sluice.http.auth.bearer.token or the file's first one).
	PeerToken func() string
}

// Server is a node's HTTP side: the cluster console, its JSON API and
// /metrics. Close stops its rate sampler.
type Server struct {
	debug       bool
	peerTLS     *tls.Config
	peerToken   func() string
	b           *broker.Broker
	groups      func() []group.Summary
	shares      func(now time.Time) []share.PartitionStatus
	txns        func() []Transaction
	version     string
	started     time.Time
	peerTimeout time.Duration
	client      *http.Client
	rates       *sampler

	cacheMu  sync.Mutex // serializes fan-outs; guards cached, cachedAt
	cached   *ClusterView
	cachedAt time.Time

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New starts a Server (and its rate sampler goroutine).
func New(o Options) *Server {
	if o.PeerTimeout <= 0 {
		o.PeerTimeout = 800 * time.Millisecond
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Server{b: o.Broker, groups: o.Groups, shares: o.SharePartitions, txns: o.Transactions, debug: o.Debug, version: o.Version, started: time.Now(), peerTimeout: o.PeerTimeout,
		peerTLS: o.PeerTLS, peerToken: o.PeerToken,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second, TLSClientConfig: o.PeerTLS}},
		rates:  &sampler{b: o.Broker}, stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.rates.run(s.stop)
	}()
	return s
}

// Close stops the sampler and closes idle peer connections.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
	s.client.CloseIdleConnections()
	return nil
}

// Handler returns the node's HTTP handler:
//
//	/status, /            the cluster console (HTML; polls /api/v1/cluster)
//	/api/v1/cluster       ClusterView: everything below in one snapshot
//	/api/v1/brokers       ClusterView.Brokers
//	/api/v1/partitions    ClusterView.Partitions
//	/api/v1/topics        ClusterView.Topics
//	/api/v1/groups        ClusterView.Groups
//	/api/v1/transactions  ClusterView.Transactions
//	/api/v1/              the list of these endpoints (Endpoints)
//	/api/v1/node          this node's own NodeView (what the others fetch)
//	/metrics              Prometheus
//	/debug/pprof/         Go profiles, only with Options.Debug
//	/healthz              liveness: 200 "ok" while the process serves HTTP
//	/readyz               readiness: 200 when this broker is registered and
//	                      unfenced in the cluster metadata, else 503
//
// Wrap it with Auth.Protect to ask for credentials (the health paths stay
// open).
func (s *Server) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(s.b))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{metrics.Registry, reg}, promhttp.HandlerOpts{}))
	if s.debug {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/api/v1/node", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.nodeView()) })
	view := func(pick func(*ClusterView) any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, pick(s.Cluster(r.Context()))) }
	}
	mux.HandleFunc("/api/v1/cluster", view(func(v *ClusterView) any { return v }))
	mux.HandleFunc("/api/v1/brokers", view(func(v *ClusterView) any { return v.Brokers }))
	mux.HandleFunc("/api/v1/partitions", view(func(v *ClusterView) any { return v.Partitions }))
	mux.HandleFunc("/api/v1/topics", view(func(v *ClusterView) any { return v.Topics }))
	mux.HandleFunc("/api/v1/groups", view(func(v *ClusterView) any { return v.Groups }))
	mux.HandleFunc("/api/v1/transactions", view(func(v *ClusterView) any { return v.Transactions }))
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/" {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, Endpoints)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", s.serveReady)
	mux.HandleFunc("/status", s.serveConsole)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		s.serveConsole(w, r)
	})
	return mux
}

// Endpoint is one path of the JSON API, as /api/v1/ lists it.
type Endpoint struct {
	Path        string `json:"path"`
	Description string `json:"description"`
}

// Endpoints are the JSON API's paths (docs/console.md describes each).
var Endpoints = []Endpoint{
	{"/api/v1/cluster", "the whole cluster view: brokers, topics, partitions, groups, transactions and a summary, in one snapshot"},
	{"/api/v1/brokers", "the cluster view's brokers"},
	{"/api/v1/topics", "the cluster view's topics"},
	{"/api/v1/partitions", "the cluster view's partitions"},
	{"/api/v1/groups", "the cluster view's consumer groups with their lag"},
	{"/api/v1/transactions", "the cluster view's open transactions"},
	{"/api/v1/node", "this node's own view (what the other nodes fetch)"},
}

// serveReady answers /readyz: 200 when this broker is registered and
// neither fenced nor shutting down, else 503 with the reason.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	br, ok := s.b.Image().Brokers[s.b.NodeID()]
	switch {
	case !ok:
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not registered\n"))
	case !br.Active():
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("fenced or shutting down\n"))
	default:
		w.Write([]byte("ready\n"))
	}
}

// writeJSON answers with v as indented JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(v)
}

//go:embed console.html
var consoleHTML string

// consolePage is the console: one self-contained page (inline CSS and
// JS, no external assets) with the first snapshot embedded, so it renders
// at once; its script then polls /api/v1/cluster every second.
var consolePage = template.Must(template.New("console").Parse(consoleHTML))

// serveConsole renders the console page.
func (s *Server) serveConsole(w http.ResponseWriter, r *http.Request) {
	v := s.Cluster(r.Context())
	js, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := consolePage.Execute(&buf, struct {
		Node    int32
		Initial template.JS
	}{s.b.NodeID(), template.JS(js)}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes())
}
