package protocol

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Client is a minimal Kafka-protocol client for broker-to-broker calls
// (follower fetches, ListOffsets): one connection, one request in flight,
// fixed versions chosen by the caller. It reconnects on the next call after
// an error, and a read-only request whose reused connection turns out
// closed by the peer (a restart) is sent again at once on a new one.
type Client struct {
	addr     string
	clientID string
	// MaxResponseBytes bounds a response frame. Default 256 MiB.
	MaxResponseBytes int32
	// TLS, if set, wraps every connection in TLS (an SSL or SASL_SSL
	// listener); its ServerName is the name the peer's certificate must
	// carry. Set before the first Request.
	TLS *tls.Config
	// SASL, if set, authenticates every new connection with this
	// mechanism (SaslHandshake v1, then SaslAuthenticate v1; a SASL_*
	// listener). Set before the first Request.
	SASL sasl.Mechanism

	mu     sync.Mutex
	nc     net.Conn
	br     *bufio.Reader
	corrID int32
	buf    []byte
	// respBuf is the body of the last response to RequestReusing, kept
	// for the next one.
	respBuf []byte

	sent, received atomic.Int64 // frame bytes, size prefixes included
}

// Traffic returns the bytes of the request frames written and the
// response frames read so far (size prefixes included).
func (c *Client) Traffic() (sent, received int64) {
	return c.sent.Load(), c.received.Load()
}

// NewClient returns a client for addr; it dials lazily.
func NewClient(addr, clientID string) *Client {
	return &Client{addr: addr, clientID: clientID, MaxResponseBytes: 256 << 20}
}

// Addr is the peer address.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked()
}

func (c *Client) closeLocked() error {
	if c.nc == nil {
		return nil
	}
	err := c.nc.Close()
	c.nc, c.br = nil, nil
	return err
}

// MaxReusedResponseBytes bounds the response body RequestReusing keeps
// for the next call; a larger one is allocated for its call alone.
const MaxReusedResponseBytes = 16 << 20

// Request sends req (at the version already set on it) and returns the
// response. The context's deadline bounds the whole exchange; cancelling it
// closes the connection.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.request(ctx, req, false)
}

// RequestReusing is Request for a caller that is done with each response
// before its next RequestReusing call on c (a follower fetcher, which
// appends the records of an answer before it fetches again): the response
// is read into a buffer c keeps for the next call, and its byte fields (a
// fetch response's records) alias that buffer, instead of a new buffer
// per response. Responses of Request are not affected.
func (c *Client) RequestReusing(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.request(ctx, req, true)
}

func (c *Client) request(ctx context.Context, req kmsg.Request, reuse bool) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reused := c.nc != nil
	resp, err := c.exchange(ctx, req, reuse)
	if err != nil && reused && ctx.Err() == nil && staleConn(err) && readOnly(req.Key()) {
		// The connection was opened before the peer restarted (or an
		// idle timeout closed it at the peer): its first use fails with
		// EOF or a reset. A read is sent again, once, on a new one.
		resp, err = c.exchange(ctx, req, reuse)
	}
	return resp, err
}

// staleConn reports whether err is how a connection the peer closed
// (a restart, an idle timeout) fails its next exchange: EOF, a reset,
// a broken pipe.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readOnly reports whether a request of api key k only reads, so that
// sending it twice is harmless: Fetch, ListOffsets, Metadata,
// ApiVersions, OffsetForLeaderEpoch, DescribeConfigs.
func readOnly(k int16) bool {
	switch k {
	case 1, 2, 3, apiVersionsKey, 23, 32:
		return true
	}
	return false
}

// exchange sends req and reads its response on c's connection, dialling
// one first if there is none (mu held). A failed exchange closes the
// connection.
func (c *Client) exchange(ctx context.Context, req kmsg.Request, reuse bool) (kmsg.Response, error) {
	if c.nc == nil {
		d := net.Dialer{Timeout: 5 * time.Second}
		nc, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		if c.TLS != nil {
			tc := tls.Client(nc, c.TLS)
			hctx, cancel := context.WithTimeout(ctx, TLSHandshakeTimeout)
			err := tc.HandshakeContext(hctx)
			cancel()
			if err != nil {
				nc.Close()
				return nil, &AuthError{fmt.Errorf("TLS handshake with %s: %w", c.addr, err)}
			}
			nc = tc
		}
		c.nc, c.br = nc, bufio.NewReaderSize(nc, 64<<10)
		if c.SASL != nil {
			if err := c.authenticate(ctx); err != nil {
				c.closeLocked()
				return nil, &AuthError{fmt.Errorf("SASL %s with %s: %w", c.SASL.Name(), c.addr, err)}
			}
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(dl)
	} else {
		c.nc.SetDeadline(time.Now().Add(2 * time.Minute))
	}
	// The connection, not c.nc: a failed exchange clears c.nc while
	// this function may already be running on cancellation.
	nc := c.nc
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	resp, err := c.roundTrip(req, reuse)
	if err != nil {
		c.closeLocked()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return resp, nil
}

func (c *Client) roundTrip(req kmsg.Request, reuse bool) (kmsg.Response, error) {
	c.corrID++
	corr := c.corrID
	b := c.buf[:0]
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.clientID)))
	b = append(b, c.clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	n, err := c.nc.Write(b)
	c.sent.Add(int64(n))
	if err != nil {
		return nil, err
	}
	if cap(b) <= 1<<20 {
		c.buf = b
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	if size < 4 || size > c.MaxResponseBytes {
		return nil, fmt.Errorf("protocol: response size %d out of bounds", size)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		return nil, fmt.Errorf("protocol: correlation id %d, want %d", got, corr)
	}
	var body []byte
	switch n := int(size - 4); {
	case reuse && cap(c.respBuf) >= n:
		body = c.respBuf[:n]
	case reuse && n <= MaxReusedResponseBytes:
		body = make([]byte, n)
		c.respBuf = body
	default:
		body = make([]byte, n)
	}
	n, err = io.ReadFull(c.br, body)
	c.received.Add(int64(len(hdr) + n))
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, errors.New("protocol: bad response header tags")
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("protocol: decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// authenticate runs the SASL exchange on a new connection (franz-go's
// own flow): SaslHandshake v1 naming the mechanism, then SaslAuthenticate
// v1 requests carrying the mechanism's messages until it is done.
func (c *Client) authenticate(ctx context.Context) error {
	c.nc.SetDeadline(time.Now().Add(TLSHandshakeTimeout))
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(dl)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = c.SASL.Name()
	r, err := c.roundTrip(hs, false)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(r.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(c.addr)
	session, msg, err := c.SASL.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for step := 0; ; step++ {
		if step == maxSASLSteps {
			return errors.New("too many SASL messages")
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = msg
		r, err := c.roundTrip(req, false)
		if err != nil {
			return err
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return err
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		msg = next
	}
}

// AuthError is a failed TLS handshake or SASL authentication of a new
// connection: a configuration problem worth a warning, unlike a peer
// that is down.
type AuthError struct{ Err error }

func (e *AuthError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *AuthError) Unwrap() error { return e.Err }
