package protocol

import (
	"errors"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/internal/metrics"
)

// Config bounds the protocol layer. Zero fields take the defaults noted.
type Config struct {
	// MaxRequestBytes is socket.request.max.bytes: the largest request frame
	// accepted, checked before any allocation. Default 100 MiB.
	MaxRequestBytes int32
	// MaxInFlightBytes bounds the bytes of requests read but not yet
	// answered across all connections (queued.max.request.bytes); readers
	// block when it is reached. Default 512 MiB.
	MaxInFlightBytes int64
	// MaxInFlightPerConn bounds pipelined requests per connection whose
	// responses are not yet written. Default 100.
	MaxInFlightPerConn int
	// MaxConnections is max.connections; further connections are closed at
	// once (Kafka's acceptor waits for a slot instead). Default 10000.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip: a connection from
	// an IP address that already has this many is closed at once
	// (ConnectionQuotas). Zero or less: unlimited (Kafka's default,
	// Integer.MAX_VALUE).
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides are the per-IP limits of
	// max.connections.per.ip.overrides (ParsePerIPOverrides), by IP
	// address; they win over MaxConnectionsPerIP.
	MaxConnectionsPerIPOverrides map[string]int
	// MaxConnectionCreationRate is max.connection.creation.rate (KIP-612),
	// connections per second across the server's listeners: the acceptor
	// waits before accepting more. Zero or less: unlimited.
	MaxConnectionCreationRate float64
	// IdleTimeout is connections.max.idle.ms: a connection with no request
	// for this long is closed, authenticated or not (a connection that
	// never sends SaslHandshake is closed after it, as in Kafka). Default
	// 10 minutes.
	IdleTimeout time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake of a connection to a
	// TLS listener, so a client that connects and stalls cannot hold a
	// connection. Default 10 s; IdleTimeout bounds it too if shorter.
	TLSHandshakeTimeout time.Duration
	// Logger receives connection-level errors. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) fill() {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 100 << 20
	}
	if c.MaxInFlightBytes <= 0 {
		c.MaxInFlightBytes = 512 << 20
	}
	if c.MaxInFlightPerConn <= 0 {
		c.MaxInFlightPerConn = 100
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 10000
	}
	if c.MaxConnectionsPerIP <= 0 {
		c.MaxConnectionsPerIP = math.MaxInt32
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 10 * time.Minute
	}
	if c.TLSHandshakeTimeout <= 0 {
		c.TLSHandshakeTimeout = TLSHandshakeTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Server accepts Kafka connections and serves them from a Registry.
type Server struct {
	cfg      Config
	reg      *Registry
	inflight *byteSem
	quotas   *connQuotas
	// done is closed by Close (ends acceptor and throttle waits).
	done chan struct{}
	// ready, once set (HoldRequests), holds every request but
	// ApiVersions until it is closed.
	ready atomic.Pointer[<-chan struct{}]

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[*Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a server for reg.
func NewServer(cfg Config, reg *Registry) *Server {
	cfg.fill()
	return &Server{cfg: cfg, reg: reg, inflight: newByteSem(cfg.MaxInFlightBytes), quotas: newConnQuotas(&cfg),
		done: make(chan struct{}), conns: make(map[*Conn]struct{}), lns: make(map[net.Listener]struct{})}
}

// HoldRequests makes every connection hold its requests, ApiVersions
// excepted, until ready is closed (or the server closes): a broker takes
// connections as soon as it starts but serves them only once it has caught
// up with the metadata log, as Kafka's BrokerServer enables request
// processing only after the initial metadata catch-up. ApiVersions is
// answered at once (it needs no metadata), so a client or a readiness
// probe sees the broker up while requests that would read a stale image
// wait. Call it before serving.
func (s *Server) HoldRequests(ready <-chan struct{}) { s.ready.Store(&ready) }

// SetConnectionLimits changes max.connections, max.connections.per.ip,
// its overrides and max.connection.creation.rate at run time (dynamic
// broker configs, Kafka's SocketServer.reconfigure): new connections are
// checked against them; connections already open are kept, as in Kafka.
// Values <= 0 keep NewServer's defaults.
func (s *Server) SetConnectionLimits(maxConns, maxPerIP int, overrides map[string]int, rate float64) {
	if maxConns <= 0 {
		maxConns = 10000
	}
	if maxPerIP <= 0 {
		maxPerIP = math.MaxInt32
	}
	s.mu.Lock()
	s.cfg.MaxConnections = maxConns
	s.quotas.maxPerIP, s.quotas.overrides = maxPerIP, overrides
	s.mu.Unlock()
	s.quotas.setRate(rate)
}

// Serve accepts connections on ln, an unnamed PLAINTEXT listener, until
// Close. It returns nil after Close.
func (s *Server) Serve(ln net.Listener) error { return s.ServeListener(ln, Listener{}) }

// ServeListener accepts connections on ln as the listener l until Close;
// a Server may serve several listeners at once. It returns nil after
// Close.
func (s *Server) ServeListener(ln net.Listener, l Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	lp := &l
	var backoff time.Duration
	for {
		if d := s.quotas.delay(time.Now()); d > 0 {
			// max.connection.creation.rate: wait before accepting.
			metrics.ConnectionAcceptThrottle.Add(d.Seconds())
			select {
			case <-time.After(d):
			case <-s.done:
				return nil
			}
		}
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Transient (e.g. EMFILE): back off and keep serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		ip := ipOf(nc)
		s.mu.Lock()
		if s.closed || len(s.conns) >= s.cfg.MaxConnections || !s.quotas.inc(ip) {
			limit := "max.connections.per.ip"
			if len(s.conns) >= s.cfg.MaxConnections {
				limit = "max.connections"
			}
			s.mu.Unlock()
			nc.Close()
			metrics.ConnectionsRejected.WithLabelValues(limit).Inc()
			continue
		}
		c := newConn(s, nc, lp)
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		metrics.Connections.Inc()
		metrics.ConnectionsAccepted.WithLabelValues(l.Name).Inc()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.quotas.dec(ip)
			s.mu.Unlock()
			metrics.Connections.Dec()
		}()
	}
}

// NumConns is the number of open connections.
func (s *Server) NumConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops accepting, closes every connection and waits for their
// goroutines to finish.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.done)
	}
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// byteSem is a weighted semaphore over request bytes.
type byteSem struct {
	mu    sync.Mutex
	cond  *sync.Cond
	limit int64
	used  int64
}

func newByteSem(limit int64) *byteSem {
	b := &byteSem{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire takes n bytes, waiting while others hold too much. A single
// request larger than the limit is admitted alone.
func (b *byteSem) acquire(n int64) {
	b.mu.Lock()
	for b.used > 0 && b.used+n > b.limit {
		b.cond.Wait()
	}
	b.used += n
	b.mu.Unlock()
}

func (b *byteSem) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}
