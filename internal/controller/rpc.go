package controller

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/security"
)

// The controller port carries two protocols. The dialer writes one byte
// first: connRaft for hashicorp/raft's NetworkTransport, connRPC for the
// controller RPCs (length-prefixed JSON frames). With TLS (the CONTROLLER
// listener mapped to SSL) the handshake comes before that byte, so both
// protocols run inside it.
const (
	connRaft byte = 'R'
	connRPC  byte = 'C'

	// maxFrame bounds an RPC frame (a fetch response carries a whole image).
	maxFrame = 64 << 20
	// handshakeTimeout bounds reading the first byte of a connection.
	handshakeTimeout = 5 * time.Second
	// rpcIdleTimeout closes an RPC connection idle for this long.
	rpcIdleTimeout = 2 * time.Minute
	// maxConns bounds the connections on the controller port.
	maxConns = 4096
	// writeTimeout bounds writing one frame.
	writeTimeout = 10 * time.Second
)

// mux accepts connections on the controller listener and routes them by
// their first byte.
type mux struct {
	ln     net.Listener
	tls    *tls.Config // nil: plain TCP
	raftCh chan net.Conn
	rpc    func(net.Conn)
	log    *slog.Logger
	// raftEnded, if set, is called (once per connection) when a raft
	// connection another voter opened to this one fails to read: it
	// ended, or raft closed it (leaderloss.go).
	raftEnded func()

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// newMux serves ln: RPC connections go to rpc, raft connections to the
// stream layer (watched by raftEnded if it is not nil).
func newMux(ln net.Listener, rpc func(net.Conn), raftEnded func(), tc *tls.Config, log *slog.Logger) *mux {
	m := &mux{ln: ln, tls: tc, raftCh: make(chan net.Conn), rpc: rpc, raftEnded: raftEnded, log: log, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	m.wg.Add(1)
	go m.accept()
	return m
}

func (m *mux) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		c.Close()
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *mux) untrack(c net.Conn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
	c.Close()
}

func (m *mux) accept() {
	defer m.wg.Done()
	var backoff time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		m.mu.Lock()
		full := len(m.conns) >= maxConns
		m.mu.Unlock()
		if full {
			m.log.Warn("controller port: connection limit reached", "limit", maxConns)
			c.Close()
			continue
		}
		if !m.track(c) {
			return
		}
		m.wg.Add(1)
		go m.route(c)
	}
}

func (m *mux) route(raw net.Conn) {
	defer m.wg.Done()
	c := raw
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	if m.tls != nil {
		tc := tls.Server(raw, m.tls)
		if err := tc.Handshake(); err != nil {
			// A peer that closes before its hello (a liveness probe,
			// liveness.go) is not a failed handshake worth a warning.
			if !errors.Is(err, io.EOF) {
				m.log.Warn("controller port: TLS handshake failed", "remote", raw.RemoteAddr(), "err", err)
			}
			m.untrack(raw)
			return
		}
		c = tc
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		m.untrack(raw)
		return
	}
	raw.SetDeadline(time.Time{})
	switch b[0] {
	case connRaft:
		if m.raftEnded != nil {
			c = &watchedConn{Conn: c, ended: m.raftEnded}
		}
		select {
		case m.raftCh <- c: // raft owns it now; mux.close still closes raw
		case <-m.done:
			m.untrack(raw)
		}
	case connRPC:
		m.rpc(c)
		m.untrack(raw)
	default:
		m.untrack(raw)
	}
}

// close stops accepting, closes every connection and waits for handlers.
func (m *mux) close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.done)
	m.ln.Close()
	for c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// watchedConn calls ended once, on the first failed read.
type watchedConn struct {
	net.Conn
	ended func()
	once  sync.Once
}

// Read implements net.Conn.
func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.once.Do(c.ended)
	}
	return n, err
}

// streamLayer is raft's view of the mux: raft connections in, dials out
// with the connRaft byte.
type streamLayer struct {
	m    *mux
	addr raftAddr
	tls  *tls.Config // dialing voters; nil: plain TCP
	once sync.Once
	done chan struct{}
}

type raftAddr string

func (a raftAddr) Network() string { return "tcp" }
func (a raftAddr) String() string  { return string(a) }

// Accept implements net.Listener.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.m.raftCh:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	case <-s.m.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener (the mux's listener stays open until the
// node closes it).
func (s *streamLayer) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

// Addr implements net.Listener: the advertised voter address.
func (s *streamLayer) Addr() net.Addr { return s.addr }

// Dial implements raft.StreamLayer. The connection is tracked by the mux,
// so that mux.close ends raft's outgoing RPCs too (Node.CloseNow).
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := dialKind(context.Background(), string(address), timeout, connRaft, s.tls)
	if err != nil {
		return nil, err
	}
	if !s.m.track(c) {
		return nil, net.ErrClosed
	}
	return &trackedConn{Conn: c, m: s.m}, nil
}

// trackedConn is an outgoing raft connection the mux tracks until raft
// closes it.
type trackedConn struct {
	net.Conn
	m *mux
}

// Close implements net.Conn: it untracks and closes the connection.
func (c *trackedConn) Close() error {
	c.m.untrack(c.Conn)
	return nil
}

// dialKind connects to a voter's controller port for kind (connRaft or
// connRPC), over TLS when tc is set (the host of addr is the name its
// certificate must carry, unless tc verifies the chain only).
func dialKind(ctx context.Context, addr string, timeout time.Duration, kind byte, tc *tls.Config) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	if tc != nil {
		cfg := tc.Clone()
		if tc.ServerName == "" {
			// The certificate must name the host dialed; ForHost also
			// binds it to the check of a trust store that is reloaded.
			cfg = security.ForHost(tc, addr)
		}
		t := tls.Client(c, cfg)
		if err := t.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("controller port %s: TLS handshake: %w", addr, err)
		}
		c = t
	}
	if _, err := c.Write([]byte{kind}); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// rpcRequest and rpcResponse are the frames of the controller RPC.
type rpcRequest struct {
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body,omitempty"`
}

type rpcResponse struct {
	// Code is a Kafka error code; NOT_CONTROLLER makes the client retry
	// against Leader (the raft leader as the server knows it) or another
	// voter.
	Code int16  `json:"code,omitempty"`
	Msg  string `json:"msg,omitempty"`
	// Leader is the server's view of the active controller's address.
	Leader string `json:"leader,omitempty"`
	// Offset is the metadata offset of the write, if any: the caller
	// waits for its own image to reach it before returning.
	Offset int64           `json:"offset,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
}

func writeFrame(c net.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxFrame {
		return fmt.Errorf("controller: frame of %d bytes exceeds limit", len(b))
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = c.Write(buf)
	return err
}

func readFrame(c net.Conn, v any) error {
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > maxFrame {
		return fmt.Errorf("controller: frame of %d bytes exceeds limit", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// errResponse encodes err as a response code.
func errResponse(err error) rpcResponse {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return rpcResponse{Code: ke.Code, Msg: err.Error()}
	}
	return rpcResponse{Code: kerr.UnknownServerError.Code, Msg: err.Error()}
}

// remoteErr is a controller-side error: it unwraps to the *kerr.Error of
// its code and keeps the controller's message.
type remoteErr struct {
	code error
	msg  string
}

func (e *remoteErr) Error() string { return e.msg }
func (e *remoteErr) Unwrap() error { return e.code }

func codeErr(code int16, msg string) error {
	ke := kerr.ErrorForCode(code)
	if ke == nil {
		return nil
	}
	if msg == "" || msg == ke.Error() {
		return ke
	}
	return &remoteErr{code: ke, msg: msg}
}

// client sends RPCs to the active controller, following leader hints and
// rotating over the voters on NOT_CONTROLLER or connection errors.
type client struct {
	voters []string
	tls    *tls.Config                                           // nil: plain TCP
	self   string                                                // this voter's address, "" on a broker-only node
	local  func(ctx context.Context, req rpcRequest) rpcResponse // serves calls to self in-process

	mu     sync.Mutex
	leader string
	next   int
	idle   map[string][]net.Conn
	closed bool
}

const (
	maxIdlePerAddr = 2
	// defaultCallTimeout bounds a call whose context has no deadline.
	defaultCallTimeout = 30 * time.Second
	// attemptTimeout bounds one round trip (a long-poll adds its wait).
	attemptTimeout = 10 * time.Second
)

func (c *client) target() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader != "" {
		return c.leader
	}
	t := c.voters[c.next%len(c.voters)]
	return t
}

func (c *client) hint(from, leader string, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case leader != "" && leader != from:
		c.leader = leader
	case failed:
		c.leader = ""
		c.next++
	case leader != "":
		c.leader = leader
	}
}

// call sends op to the active controller and decodes its reply into out.
// It returns the reply's metadata offset.
func (c *client) call(ctx context.Context, op string, in, out any, extra time.Duration) (int64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCallTimeout)
		defer cancel()
	}
	body, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	req := rpcRequest{Op: op, Body: body}
	backoff := 20 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("%w: controller %s: %v", kerr.RequestTimedOut, op, err)
		}
		addr := c.target()
		var resp rpcResponse
		if addr == c.self && c.local != nil {
			resp = c.local(ctx, req)
		} else {
			resp, err = c.roundTrip(ctx, addr, req, attemptTimeout+extra)
			if err != nil {
				c.hint(addr, "", true)
				if !sleepCtx(ctx, backoff) {
					continue
				}
				backoff = min(2*backoff, 500*time.Millisecond)
				continue
			}
		}
		if resp.Code == kerr.NotController.Code {
			c.hint(addr, resp.Leader, true)
			sleepCtx(ctx, backoff)
			backoff = min(2*backoff, 500*time.Millisecond)
			continue
		}
		c.hint(addr, resp.Leader, false)
		if resp.Code != 0 {
			return resp.Offset, codeErr(resp.Code, resp.Msg)
		}
		if out != nil && len(resp.Body) > 0 {
			if err := json.Unmarshal(resp.Body, out); err != nil {
				return 0, err
			}
		}
		return resp.Offset, nil
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (c *client) roundTrip(ctx context.Context, addr string, req rpcRequest, timeout time.Duration) (rpcResponse, error) {
	var resp rpcResponse
	conn, err := c.conn(ctx, addr)
	if err != nil {
		return resp, err
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	err = writeFrame(conn, req)
	if err == nil {
		conn.SetDeadline(deadline)
		err = readFrame(conn, &resp)
	}
	if !stop() || err != nil {
		conn.Close()
		if err == nil {
			err = ctx.Err()
		}
		return resp, err
	}
	conn.SetDeadline(time.Time{})
	c.put(addr, conn)
	return resp, nil
}

func (c *client) conn(ctx context.Context, addr string) (net.Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, net.ErrClosed
	}
	if l := c.idle[addr]; len(l) > 0 {
		conn := l[len(l)-1]
		c.idle[addr] = l[:len(l)-1]
		c.mu.Unlock()
		return conn, nil
	}
	c.mu.Unlock()
	return dialKind(ctx, addr, 3*time.Second, connRPC, c.tls)
}

func (c *client) put(addr string, conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle[addr]) >= maxIdlePerAddr {
		conn.Close()
		return
	}
	c.idle[addr] = append(c.idle[addr], conn)
}

func (c *client) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, l := range c.idle {
		for _, conn := range l {
			conn.Close()
		}
	}
	c.idle = nil
}
