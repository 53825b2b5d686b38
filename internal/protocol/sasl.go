package protocol

// SASL authentication on SASL_PLAINTEXT and SASL_SSL listeners: Kafka's
// SaslServerAuthenticator. A connection starts unauthenticated and may send
// only ApiVersions, SaslHandshake (v0-v1) and then SaslAuthenticate
// (v0-v2) — any other request closes it, as in Kafka. SaslHandshake names
// a mechanism (an unknown one gets UNSUPPORTED_SASL_MECHANISM with the
// enabled list, and the connection is closed); with SaslHandshake v0 the
// tokens that follow are raw size-prefixed frames (KIP-43), with v1 they
// are SaslAuthenticate requests (KIP-152). A failed exchange gets
// SASL_AUTHENTICATION_FAILED with a message after
// connection.failed.authentication.delay.ms, then the connection is
// closed.
//
// Re-authentication (KIP-368): with connections.max.reauth.ms set for the
// mechanism (SASL.MaxReauth), a successful SaslAuthenticate carries
// SessionLifetimeMillis, the smaller of that setting and the credential's
// remaining lifetime (an OAUTHBEARER token's exp), and the session ends
// then. An authenticated connection with an expiring session may
// re-authenticate in place: SaslHandshake v1 with the same mechanism,
// then SaslAuthenticate, as Kafka's KafkaChannel.maybeBeginServerReauthentication
// allows; the new principal must be the old one ("Cannot change
// principals during re-authentication"), else the connection is failed
// and closed. Any other request once the session has expired, or during
// a re-authentication, closes the connection, as Kafka does. Without an
// expiring session a Sasl* request after authentication gets
// ILLEGAL_SASL_STATE, as on a listener without SASL.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/metrics"
)

// API keys of the SASL requests.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// MaxSASLReceiveBytes bounds a request before authentication (Kafka's
// sasl.server.max.receive.size default, 512 KiB).
const MaxSASLReceiveBytes = 512 << 10

// maxSASLSteps bounds the messages of one exchange (SCRAM takes two).
const maxSASLSteps = 10

// maxFailureDelay caps connection.failed.authentication.delay.ms.
const maxFailureDelay = 10 * time.Second

// SASL configures authentication on a listener.
type SASL struct {
	// Mechanisms are the enabled mechanisms (sasl.enabled.mechanisms).
	Mechanisms []string
	// Server starts the server side of one exchange of an enabled
	// mechanism.
	Server func(mechanism string) SASLServer
	// FailureDelay delays the answer to a failed authentication
	// (connection.failed.authentication.delay.ms, capped at 10 s).
	FailureDelay time.Duration
	// MaxReauth is connections.max.reauth.ms by mechanism (KIP-368); a
	// mechanism missing or 0 has sessions that never expire.
	MaxReauth map[string]time.Duration
}

// CredentialExpirer is a SASLServer whose credential expires (an
// OAUTHBEARER token): a session never outlives it (KIP-368).
type CredentialExpirer interface {
	CredentialExpiry() time.Time
}

// SASLServer is the server side of one SASL exchange.
type SASLServer interface {
	// Step takes the client's next message and returns the reply; done
	// reports a completed, successful exchange. An error fails the
	// authentication; its text is sent to the client, so it must not
	// reveal more than Kafka's messages do.
	Step(msg []byte) (reply []byte, done bool, err error)
	// User is the authenticated user once Step reported done.
	User() string
}

// saslConn is a connection's authentication state (reader goroutine
// only).
type saslConn struct {
	mech   string
	server SASLServer
	steps  int
	raw    bool // SaslHandshake v0: raw token frames follow
	done   bool
	// expiry ends the session (KIP-368); zero: never.
	expiry time.Time
	// reauth is set while a re-authentication exchange runs.
	reauth bool
}

// saslReauth reports whether a Sasl* request on an authenticated
// connection is a KIP-368 re-authentication (the session expires, or one
// is under way) rather than an illegal one.
func (c *Conn) saslReauth(key int16) bool {
	return c.l != nil && c.l.SASL != nil && c.sasl.done &&
		(key == saslHandshakeKey || key == saslAuthenticateKey) &&
		(c.sasl.reauth || !c.sasl.expiry.IsZero())
}

// saslExpired reports whether a request other than SaslHandshake and
// SaslAuthenticate must close the connection: its session has expired,
// or it re-authenticates (Kafka's "Unexpected Kafka request ... during
// SASL handshake").
func (c *Conn) saslExpired(key int16) bool {
	if c.l == nil || c.l.SASL == nil || !c.sasl.done || key == saslHandshakeKey || key == saslAuthenticateKey {
		return false
	}
	return c.sasl.reauth || (!c.sasl.expiry.IsZero() && time.Now().After(c.sasl.expiry))
}

// saslPending reports whether the connection must still authenticate.
func (c *Conn) saslPending() bool {
	return c.l != nil && c.l.SASL != nil && !c.sasl.done
}

// registerSASL installs SaslHandshake and SaslAuthenticate: answered by
// the connection while it authenticates (serveSASL), ILLEGAL_SASL_STATE
// otherwise (no SASL on the listener, or already authenticated).
func (r *Registry) registerSASL() {
	illegal := func(req *Request) Reply {
		resp := req.Body.ResponseKind()
		switch resp := resp.(type) {
		case *kmsg.SASLHandshakeResponse:
			resp.ErrorCode = kerr.IllegalSaslState.Code
		case *kmsg.SASLAuthenticateResponse:
			resp.ErrorCode = kerr.IllegalSaslState.Code
			msg := "SASL authentication is not expected on this connection"
			resp.ErrorMessage = &msg
		}
		return Reply{Resp: resp}
	}
	r.Register(Handler{Key: saslHandshakeKey, MinVersion: 0, MaxVersion: 1, Serve: illegal})
	r.Register(Handler{Key: saslAuthenticateKey, MinVersion: 0, MaxVersion: 2, Serve: illegal})
}

// serveSASL answers SaslHandshake and SaslAuthenticate while the
// connection authenticates.
func (c *Conn) serveSASL(req *Request) Reply {
	cfg := c.l.SASL
	switch body := req.Body.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp := body.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = slices.Clone(cfg.Mechanisms)
		if c.sasl.server != nil {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return Reply{Resp: resp, Close: true}
		}
		if c.sasl.done {
			// KIP-368: re-authentication needs v1 and the same mechanism.
			if req.Version < 1 || body.Mechanism != c.sasl.mech {
				c.srv.cfg.Logger.Info("re-authentication refused: SaslHandshake v0 or a changed mechanism", "listener", c.l.Name, "remote", c.nc.RemoteAddr(), "mechanism", body.Mechanism)
				resp.ErrorCode = kerr.IllegalSaslState.Code
				return Reply{Resp: resp, Close: true}
			}
			c.sasl.reauth = true
		}
		if !slices.Contains(cfg.Mechanisms, body.Mechanism) {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return Reply{Resp: resp, Close: true}
		}
		c.sasl.mech, c.sasl.server = body.Mechanism, cfg.Server(body.Mechanism)
		c.sasl.steps = 0
		c.sasl.raw = req.Version == 0
		return Reply{Resp: resp}
	case *kmsg.SASLAuthenticateRequest:
		resp := body.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if c.sasl.server == nil || c.sasl.raw {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			msg := "SaslAuthenticate before a SaslHandshake v1"
			resp.ErrorMessage = &msg
			return Reply{Resp: resp, Close: true}
		}
		reply, lifetime, err := c.saslStep(body.SASLAuthBytes)
		if err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := err.Error()
			resp.ErrorMessage = &msg
			return c.failLater(resp)
		}
		resp.SASLAuthBytes = reply
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
		return Reply{Resp: resp}
	}
	return Reply{Close: true}
}

// saslStep runs one message of the exchange; once it completes, lifetime
// is the session's (KIP-368 SessionLifetimeMillis, 0 if it never
// expires). A panicking mechanism fails the authentication, never the
// broker.
func (c *Conn) saslStep(msg []byte) (reply []byte, lifetime time.Duration, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.srv.cfg.Logger.Error("SASL mechanism panic", "mechanism", c.sasl.mech, "panic", v)
			reply, lifetime, err = nil, 0, c.saslFailed(fmt.Errorf("authentication failed: internal error"))
		}
	}()
	c.sasl.steps++
	if c.sasl.steps > maxSASLSteps {
		return nil, 0, c.saslFailed(fmt.Errorf("authentication failed: too many SASL messages"))
	}
	reply, done, err := c.sasl.server.Step(msg)
	if err != nil {
		return nil, 0, c.saslFailed(err)
	}
	if !done {
		return reply, 0, nil
	}
	principal := "User:" + c.sasl.server.User()
	if c.sasl.reauth {
		if principal != c.principal {
			return nil, 0, c.saslFailed(fmt.Errorf("Cannot change principals during re-authentication from %s: %s", c.principal, principal))
		}
		metrics.Reauthentications.WithLabelValues(c.l.Name).Inc()
		c.srv.cfg.Logger.Debug("SASL re-authenticated", "listener", c.l.Name, "remote", c.nc.RemoteAddr(), "principal", principal, "mechanism", c.sasl.mech)
	} else {
		c.principal = principal
		metrics.AuthSuccesses.WithLabelValues(c.l.Name).Inc()
		c.srv.cfg.Logger.Debug("SASL authenticated", "listener", c.l.Name, "remote", c.nc.RemoteAddr(), "principal", principal, "mechanism", c.sasl.mech)
	}
	now := time.Now()
	lifetime = c.l.SASL.MaxReauth[c.sasl.mech]
	c.sasl.expiry = time.Time{}
	if lifetime > 0 {
		if ce, ok := c.sasl.server.(CredentialExpirer); ok {
			if exp := ce.CredentialExpiry(); !exp.IsZero() {
				lifetime = min(lifetime, max(exp.Sub(now), time.Millisecond))
			}
		}
		c.sasl.expiry = now.Add(lifetime)
	}
	c.sasl.done, c.sasl.reauth, c.sasl.server = true, false, nil
	return reply, lifetime, nil
}

// saslFailed counts and logs a failed exchange, a re-authentication
// apart from a first authentication as Kafka counts them. An error with a
// LogDetail method (OAUTHBEARER) logs that detail, which the client is
// not told.
func (c *Conn) saslFailed(err error) error {
	args := []any{"listener", c.l.Name, "remote", c.nc.RemoteAddr(), "mechanism", c.sasl.mech, "err", err}
	if d, ok := err.(interface{ LogDetail() string }); ok {
		args = append(args, "reason", d.LogDetail())
	}
	if c.sasl.reauth {
		metrics.FailedReauthentications.WithLabelValues(c.l.Name).Inc()
		c.srv.cfg.Logger.Info("failed re-authentication", args...)
	} else {
		metrics.AuthFailures.WithLabelValues(c.l.Name, c.sasl.mech).Inc()
		c.srv.cfg.Logger.Info("failed authentication", args...)
	}
	return err
}

// failLater answers a failed authentication after the listener's failure
// delay and closes the connection (Kafka delays the response to slow
// down password guessing, connection.failed.authentication.delay.ms).
func (c *Conn) failLater(resp kmsg.Response) Reply {
	d := min(c.l.SASL.FailureDelay, maxFailureDelay)
	return Reply{Await: func() kmsg.Response {
		time.Sleep(d)
		return resp
	}, Close: true}
}

// rawToken serves a raw SASL token frame (after SaslHandshake v0): the
// reply is a raw frame too; a failure closes the connection after the
// delay, with no response (the raw protocol has no error field).
func (c *Conn) rawToken(frame []byte) pending {
	p := pending{key: saslAuthenticateKey, start: time.Now()}
	reply, _, err := c.saslStep(frame)
	if err != nil {
		d := min(c.l.SASL.FailureDelay, maxFailureDelay)
		p.reply = Reply{Await: func() kmsg.Response { time.Sleep(d); return nil }, Close: true}
		return p
	}
	if c.sasl.done {
		c.sasl.raw = false
	}
	p.raw = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(reply)), uint32(len(reply)))
	p.raw = append(p.raw, reply...)
	p.reply = Reply{NoResponse: true}
	return p
}

// preAuthAllowed reports whether a request may come before
// authentication completes.
func preAuthAllowed(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}
