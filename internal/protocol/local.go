package protocol

import (
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Local is one in-process connection to a Registry: Do encodes a request,
// decodes it as the server would, runs its handler on the caller's
// goroutine, calls a Reply.Await at once and returns the response after an
// encode and decode of its own, so that what crosses is exactly what the
// wire would carry (tagged fields and versions included). There is no
// socket: responses are never spliced, the connection's principal is
// anonymous and its listener unnamed. A simulator's network delivers the
// brokers' own requests this way. Fetch sessions and other per-connection
// state live on the Local, as on a connection.
type Local struct {
	reg  *Registry
	conn *Conn
	mu   sync.Mutex
	corr int32
}

// NewLocal returns a new connection to reg.
func NewLocal(reg *Registry) *Local {
	return &Local{reg: reg, conn: &Conn{gone: make(chan struct{}), Values: make(map[string]any)}}
}

// ErrLocalClosed is returned by Do after Close.
var ErrLocalClosed = errors.New("protocol: local connection closed")

// Do serves one request. An Await that blocks (a long-poll fetch, acks=all)
// blocks Do; callers that must not block ask for no wait.
func (l *Local) Do(clientID string, req kmsg.Request) (kmsg.Response, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.conn.gone:
		return nil, ErrLocalClosed
	default:
	}
	h, ok := l.reg.Lookup(req.Key())
	if !ok {
		return nil, fmt.Errorf("protocol: unknown api key %d", req.Key())
	}
	v := req.GetVersion()
	if v < h.MinVersion || v > h.MaxVersion {
		return nil, fmt.Errorf("protocol: unsupported version %d of api key %d", v, req.Key())
	}
	body := kmsg.RequestForKey(req.Key())
	body.SetVersion(v)
	if err := body.ReadFrom(req.AppendTo(nil)); err != nil {
		return nil, fmt.Errorf("protocol: %s v%d does not decode: %w", kmsg.NameForKey(req.Key()), v, err)
	}
	l.corr++
	r := &Request{Key: req.Key(), Version: v, CorrelationID: l.corr, ClientID: clientID, Body: body, Conn: l.conn}
	reply, err := l.conn.serveLocal(h, r)
	if err != nil {
		return nil, err
	}
	var resp kmsg.Response
	switch {
	case reply.NoResponse:
		return nil, nil
	case reply.Await != nil:
		resp = reply.Await()
	default:
		resp = reply.Resp
	}
	if resp == nil {
		return nil, fmt.Errorf("protocol: %s handler gave no response", kmsg.NameForKey(req.Key()))
	}
	resp.SetVersion(v)
	out := req.ResponseKind()
	out.SetVersion(v)
	if err := out.ReadFrom(resp.AppendTo(nil)); err != nil {
		return nil, fmt.Errorf("protocol: %s v%d response does not decode: %w", kmsg.NameForKey(req.Key()), v, err)
	}
	return out, nil
}

// Close ends the connection: its Gone channel closes (long polls return)
// and later calls to Do fail.
func (l *Local) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.conn.gone:
	default:
		close(l.conn.gone)
	}
	return nil
}

// serveLocal runs h like serveSafely, without a server to log to.
func (c *Conn) serveLocal(h Handler, req *Request) (r Reply, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("protocol: %s handler panic: %v", kmsg.NameForKey(req.Key), v)
		}
	}()
	return h.Serve(req), nil
}
