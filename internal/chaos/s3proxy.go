package chaos

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Object store fault modes (FaultObjStore), chosen by the fault's
// Partition modulo 3.
const (
	s3Healthy = iota
	s3Slow    // every request waits before it is forwarded
	s3Errors  // every request is answered 500 InternalError or 503 SlowDown
	s3Outage  // every request is held unanswered until the heal, then cut
)

// s3ModeNames names the modes in the timeline.
var s3ModeNames = [...]string{"healthy", "slow", "errors", "outage"}

// s3Proxy is an HTTP reverse proxy in front of the S3 test server: the
// brokers' sluice.remote.storage.endpoint is its address, so the harness
// can make the object store slow, failing (5xx) or black-holed while the
// server itself stays up. Healthy, it forwards every request unchanged.
type s3Proxy struct {
	ln  net.Listener
	srv *http.Server
	rp  *httputil.ReverseProxy

	mu    sync.Mutex
	mode  int
	delay time.Duration
	heal  chan struct{} // closed when a held (outage) request is let go

	requests, slowed, failed, held atomic.Int64
}

// newS3Proxy listens on 127.0.0.1 and forwards to target (http://host:port).
func newS3Proxy(target string) (*s3Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &s3Proxy{ln: ln, rp: httputil.NewSingleHostReverseProxy(u), heal: make(chan struct{})}
	// A request the client gave up on (a timeout under an outage) is
	// expected here: no log line for it.
	p.rp.ErrorLog = log.New(io.Discard, "", 0)
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// endpoint is the URL the brokers use.
func (p *s3Proxy) endpoint() string { return "http://" + p.ln.Addr().String() }

// set changes the mode for requests that arrive from now on; leaving the
// outage lets the held requests go (their connections are cut).
func (p *s3Proxy) set(mode int, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == s3Outage && mode != s3Outage {
		close(p.heal)
		p.heal = make(chan struct{})
	}
	p.mode, p.delay = mode, delay
}

// healAll forwards everything again.
func (p *s3Proxy) healAll() { p.set(s3Healthy, 0) }

func (p *s3Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	p.mu.Lock()
	mode, delay, heal := p.mode, p.delay, p.heal
	p.mu.Unlock()
	switch mode {
	case s3Slow:
		p.slowed.Add(1)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	case s3Errors:
		n := p.failed.Add(1)
		io.Copy(io.Discard, r.Body)
		code, status, msg := "InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again."
		if n%2 == 0 {
			code, status, msg = "SlowDown", http.StatusServiceUnavailable, "Please reduce your request rate."
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource></Error>`, code, msg, r.URL.Path)
		return
	case s3Outage:
		// A black hole: the request is taken and never answered. At
		// the heal the connection is cut without an answer, as a
		// timed-out one would be.
		p.held.Add(1)
		select {
		case <-heal:
			panic(http.ErrAbortHandler)
		case <-r.Context().Done():
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// stats describes the proxy for results.json.
func (p *s3Proxy) stats() ProxyStats {
	return ProxyStats{Kind: "s3", Addr: p.ln.Addr().String(), Accepted: p.requests.Load(), Frozen: p.held.Load()}
}

// close stops the proxy, letting held requests go.
func (p *s3Proxy) close() {
	p.healAll()
	p.srv.Close()
}
