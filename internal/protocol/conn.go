package protocol

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/metrics"
)

// Conn is one client connection. Its reader goroutine decodes requests and
// calls handlers in order; its writer goroutine writes responses in the same
// order, waiting on each Reply.Await in turn.
type Conn struct {
	srv *Server
	nc  net.Conn
	l   *Listener // the listener it came in on

	pending chan pending
	// writeFailed is closed when the writer stops early (write error).
	writeFailed chan struct{}
	// gone is closed when the reader stops: the peer closed the
	// connection, or the server is closing.
	gone chan struct{}

	// Values is per-connection state for handlers (e.g. fetch sessions).
	// Only the reader goroutine touches it.
	Values map[string]any

	// principal is who the connection authenticated as (Principal); set
	// before the reader starts (TLS) or by the reader (SASL).
	principal string
	// sasl is the authentication state on a SASL listener (sasl.go).
	sasl saslConn
	// mutedUntil is when the reader may read the next request, in Unix
	// nanoseconds (Throttle).
	mutedUntil atomic.Int64
}

type pending struct {
	key, version int16
	corrID       int32
	reply        Reply
	size         int64
	start        time.Time
	// req is the request, when its time is recorded (RequestTimeFunc).
	req *Request
	// raw is a raw SASL token frame to write (after SaslHandshake v0).
	raw []byte
}

func newConn(s *Server, nc net.Conn, l *Listener) *Conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if l != nil && l.TLS != nil {
		// The handshake runs on the connection's goroutine (serve).
		nc = tls.Server(nc, l.TLS)
	}
	return &Conn{
		srv:         s,
		nc:          nc,
		l:           l,
		pending:     make(chan pending, s.cfg.MaxInFlightPerConn),
		writeFailed: make(chan struct{}),
		gone:        make(chan struct{}),
		Values:      make(map[string]any),
	}
}

// Gone is closed once the connection stops reading requests (the peer
// closed it, or the server is closing): a handler's Await may then answer
// early with what it has. A nil Conn's Gone never closes.
func (c *Conn) Gone() <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.gone
}

// RemoteAddr is the peer address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// ClientHost is the peer's IP address as text, what ACL hosts are
// compared with (Kafka's RequestContext.clientAddress), "" for an
// in-process connection.
func (c *Conn) ClientHost() string {
	if c == nil || c.nc == nil {
		return ""
	}
	if ta, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		return ""
	}
	return host
}

// MaxThrottle bounds one Throttle call.
const MaxThrottle = time.Minute

// Throttle stops the connection's reader from reading another request for
// d (at most MaxThrottle) from now: a client over its quota is muted
// after its response, as Kafka's SocketServer mutes a throttled channel
// (KIP-219). Safe from any goroutine; a longer earlier mute is kept.
func (c *Conn) Throttle(d time.Duration) {
	if c == nil || d <= 0 {
		return
	}
	until := time.Now().Add(min(d, MaxThrottle)).UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitMuted waits out a Throttle, or until the server closes.
func (c *Conn) waitMuted() bool {
	d := time.Until(time.Unix(0, c.mutedUntil.Load()))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.srv.done:
		return false
	}
}

// errClose ends a connection without a response, as Kafka does for a
// malformed or unsupported request.
type errClose struct{ reason string }

func (e errClose) Error() string { return e.reason }

func (c *Conn) serve() {
	if err := c.handshakeTLS(); err != nil {
		close(c.gone)
		c.nc.Close()
		c.srv.cfg.Logger.Debug("TLS handshake failed", "listener", c.l.Name, "remote", c.nc.RemoteAddr(), "err", err)
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.writeLoop()
	}()
	err := c.readLoop()
	close(c.gone)
	close(c.pending)
	wg.Wait()
	c.nc.Close()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.srv.cfg.Logger.Debug("connection closed", "remote", c.nc.RemoteAddr(), "err", err)
	}
}

// readLoop reads frames until EOF, an error, or a request that closes the
// connection.
func (c *Conn) readLoop() (err error) {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var sizeBuf [4]byte
	for {
		if !c.waitMuted() {
			return net.ErrClosed
		}
		c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		lo, hi := int32(8), c.srv.cfg.MaxRequestBytes
		raw := c.saslPending() && c.sasl.raw
		if c.saslPending() {
			// Before authentication, Kafka's sasl.server.max.receive.size.
			hi = min(hi, MaxSASLReceiveBytes)
			if raw {
				lo = 0
			}
		}
		if size < lo || size > hi {
			return errClose{fmt.Sprintf("request size %d out of bounds", size)}
		}
		c.srv.inflight.acquire(int64(size))
		frame, pooled := getFrame(int(size))
		if _, err := io.ReadFull(br, frame); err != nil {
			c.srv.inflight.release(int64(size))
			return err
		}
		// A mute set while this frame was awaited (a fetch's quota is
		// recorded by the writer) holds the request until it ends.
		if !c.waitMuted() {
			c.srv.inflight.release(int64(size))
			return net.ErrClosed
		}
		if !raw && !c.waitReady(frame) {
			c.srv.inflight.release(int64(size))
			return net.ErrClosed
		}
		var p pending
		if raw {
			p = c.rawToken(frame)
		} else {
			p, err = c.handle(frame, pooled)
		}
		if err != nil {
			c.srv.inflight.release(int64(size))
			return err
		}
		p.size = int64(size)
		select {
		case c.pending <- p:
		case <-c.writeFailed:
			c.srv.inflight.release(int64(size))
			return net.ErrClosed
		}
		if p.reply.Close {
			return errClose{"handler asked to close"}
		}
	}
}

// waitReady holds the request in frame until the server's ready channel
// (HoldRequests) is closed; ApiVersions goes at once. It reports false if
// the server or the connection closed meanwhile.
func (c *Conn) waitReady(frame []byte) bool {
	r := c.srv.ready.Load()
	if r == nil || int16(binary.BigEndian.Uint16(frame)) == apiVersionsKey {
		return true
	}
	select {
	case <-*r:
		return true
	case <-c.srv.done:
		return false
	case <-c.writeFailed:
		return false
	}
}

// handle decodes one frame and runs its handler.
// A pooled frame (getFrame) goes with the request, for its handler to give
// back (Request.ReleaseFrame).
func (c *Conn) handle(frame []byte, pooled bool) (p pending, err error) {
	key := int16(binary.BigEndian.Uint16(frame))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	corrID := int32(binary.BigEndian.Uint32(frame[4:]))
	p = pending{key: key, version: version, corrID: corrID, start: time.Now()}
	if c.saslExpired(key) {
		// KIP-368: Kafka closes a connection whose session expired.
		metrics.ExpiredSessionsClosed.WithLabelValues(c.l.Name).Inc()
		return p, errClose{fmt.Sprintf("api key %d after the SASL session expired or during re-authentication", key)}
	}
	if c.saslPending() && !preAuthAllowed(key) {
		// Kafka: "Unexpected Kafka request of type X during SASL
		// handshake": the connection is closed.
		return p, errClose{fmt.Sprintf("api key %d before SASL authentication", key)}
	}
	h, ok := c.srv.reg.Lookup(key)
	if !ok {
		return p, errClose{fmt.Sprintf("unknown api key %d", key)}
	}
	if version < h.MinVersion || version > h.MaxVersion {
		if key == apiVersionsKey {
			// KIP-511: answer with a v0 response carrying
			// UNSUPPORTED_VERSION and our ranges, so the client retries
			// with a version we serve.
			p.version = 0
			p.reply = Reply{Resp: c.srv.reg.apiVersionsResponse(0, kerr.UnsupportedVersion.Code)}
			return p, nil
		}
		return p, errClose{fmt.Sprintf("unsupported version %d of api key %d", version, key)}
	}
	body := kmsg.RequestForKey(key)
	body.SetVersion(version)
	rest := frame[8:]
	var clientID string
	if key != 7 { // header v0 (no client id) is only ControlledShutdown v0
		if len(rest) < 2 {
			return p, errClose{"truncated request header"}
		}
		n := int16(binary.BigEndian.Uint16(rest))
		rest = rest[2:]
		if n >= 0 {
			if int(n) > len(rest) {
				return p, errClose{"truncated client id"}
			}
			clientID = string(rest[:n])
			rest = rest[n:]
		}
	}
	if body.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			return p, err
		}
	}
	if err := body.ReadFrom(rest); err != nil {
		return p, errClose{fmt.Sprintf("malformed %s v%d: %v", kmsg.NameForKey(key), version, err)}
	}
	req := &Request{Key: key, Version: version, CorrelationID: corrID, ClientID: clientID, Size: len(frame), Body: body, Conn: c}
	if pooled {
		req.frame.Store(&frame)
	}
	if (c.saslPending() && key != apiVersionsKey) || c.saslReauth(key) {
		p.reply = c.serveSASL(req)
		return p, nil
	}
	rt := c.srv.reg.requestTime
	if rt == nil || c.saslPending() {
		p.reply, err = c.serveSafely(h, req)
		return p, err
	}
	req.start = time.Now()
	p.reply, err = c.serveSafely(h, req)
	req.served = max(time.Since(req.start), 1)
	if err != nil {
		return p, err
	}
	p.req = req
	if d := rt(req, req.served, true); d > 0 {
		c.Throttle(d)
		p.reply = withThrottle(p.reply, int32(min(d, MaxThrottle).Milliseconds()))
	}
	return p, nil
}

// withThrottle sets ms as the throttle of reply's response unless it
// carries a larger one (a response carries the largest of its throttles).
func withThrottle(reply Reply, ms int32) Reply {
	set := func(resp kmsg.Response) kmsg.Response {
		tr, ok := resp.(interface {
			kmsg.ThrottleResponse
			kmsg.SetThrottleResponse
		})
		if ok {
			if cur, _ := tr.Throttle(); cur < ms {
				tr.SetThrottle(ms)
			}
		}
		return resp
	}
	return reply.Map(set)
}

// serveSafely runs a handler and turns a panic into a closed connection, so
// one bad request can never take the broker down.
func (c *Conn) serveSafely(h Handler, req *Request) (r Reply, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.srv.cfg.Logger.Error("handler panic", "api", kmsg.NameForKey(req.Key), "version", req.Version, "panic", v)
			err = errClose{fmt.Sprintf("handler panic: %v", v)}
		}
	}()
	return h.Serve(req), nil
}

// skipTags skips a tagged-field section (KIP-482).
func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 || n > uint64(len(b)) {
		return nil, errClose{"bad tagged fields"}
	}
	b = b[used:]
	for i := uint64(0); i < n; i++ {
		_, u1 := binary.Uvarint(b)
		if u1 <= 0 {
			return nil, errClose{"bad tag"}
		}
		b = b[u1:]
		size, u2 := binary.Uvarint(b)
		if u2 <= 0 || size > uint64(len(b)-u2) {
			return nil, errClose{"bad tag size"}
		}
		b = b[u2+int(size):]
	}
	return b, nil
}

// writeLoop writes responses in request order. After a write error it
// only drains the queue (releasing in-flight bytes) until the reader stops.
func (c *Conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	buf := make([]byte, 0, 4096)
	failed := false
	fail := func() {
		if !failed {
			failed = true
			close(c.writeFailed)
			c.nc.Close()
		}
	}
	for p := range c.pending {
		if failed {
			c.srv.inflight.release(p.size)
			continue
		}
		resp := p.reply.Resp
		if p.reply.Await != nil {
			if bw.Buffered() > 0 {
				// Do not hold earlier responses back while this one waits.
				if err := bw.Flush(); err != nil {
					fail()
					c.srv.inflight.release(p.size)
					continue
				}
			}
			resp = c.await(p)
		}
		c.srv.inflight.release(p.size)
		if p.raw != nil {
			if _, err := bw.Write(p.raw); err != nil {
				fail()
				continue
			}
		}
		if p.reply.NoResponse || resp == nil {
			metrics.ObserveRequest(p.key, time.Since(p.start))
			if len(c.pending) == 0 {
				if err := bw.Flush(); err != nil {
					fail()
				}
			}
			continue
		}
		wstart := time.Now()
		resp.SetVersion(p.version)
		buf = buf[:0]
		buf = append(buf, 0, 0, 0, 0)
		buf = binary.BigEndian.AppendUint32(buf, uint32(p.corrID))
		if resp.IsFlexible() && p.key != apiVersionsKey {
			buf = append(buf, 0) // response header v1: empty tagged fields
		}
		buf = resp.AppendTo(buf)
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		if err := c.writeFrame(bw, buf, resp); err != nil {
			fail()
			continue
		}
		if cap(buf) > 1<<20 {
			buf = make([]byte, 0, 4096)
		}
		if p.req != nil {
			c.srv.reg.requestTime(p.req, time.Since(wstart), false)
		}
		metrics.ObserveRequest(p.key, time.Since(p.start))
		if len(c.pending) == 0 {
			if err := bw.Flush(); err != nil {
				fail()
			}
		}
	}
	if !failed {
		bw.Flush()
	}
}

// writeFrame writes one encoded response frame, sending the Splices of a
// Spliced response from their sources (sendfile) between its pieces. An
// error leaves the stream unusable: the caller closes the connection.
func (c *Conn) writeFrame(bw *bufio.Writer, buf []byte, resp kmsg.Response) error {
	sp, ok := resp.(Spliced)
	if !ok || len(sp.Splices()) == 0 {
		_, err := bw.Write(buf)
		return err
	}
	pieces, ok := splicePieces(buf, resp.IsFlexible(), sp.Splices())
	if !ok {
		return errBadSplice
	}
	for _, pc := range pieces {
		if pc.s == nil {
			if _, err := bw.Write(pc.b); err != nil {
				return err
			}
			continue
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		n, err := pc.s.Data.WriteTo(c.nc)
		if err == nil && n != pc.s.Len {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// errBadSplice reports a spliced response whose markers were not found
// where the encoding puts a bytes field.
var errBadSplice = errors.New("protocol: splice marker misplaced")

func (c *Conn) await(p pending) (resp kmsg.Response) {
	defer func() {
		if v := recover(); v != nil {
			c.srv.cfg.Logger.Error("handler panic", "api", kmsg.NameForKey(p.key), "panic", v)
			c.nc.Close()
			resp = nil
		}
	}()
	return p.reply.Await()
}
