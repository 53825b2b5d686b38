package protocol

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	"github.com/sluice-io/sluice/internal/metrics"
)

// Listener describes one listener a Server serves (Kafka's listeners:
// NAME://host:port with a security protocol). Responses that name brokers
// (Metadata, FindCoordinator, DescribeCluster) give their endpoints on the
// listener the request came in on.
type Listener struct {
	// Name is the listener name (upper case), e.g. PLAINTEXT. Empty on a
	// server started with Serve: handlers then answer with each broker's
	// inter-broker endpoint.
	Name string
	// TLS, if set, makes this an SSL or SASL_SSL listener: every
	// connection starts with a TLS handshake bounded by
	// Config.TLSHandshakeTimeout.
	TLS *tls.Config
	// SASL, if set, makes this a SASL_PLAINTEXT or SASL_SSL listener:
	// connections must authenticate first (sasl.go).
	SASL *SASL
	// MapPrincipal, if set, names the principal of a connection that
	// presented a verified client certificate on a TLS listener without
	// SASL (Kafka's ssl.principal.mapping.rules, security.PrincipalMapper):
	// the connection becomes User:<name>, and an error fails its
	// authentication (the connection is closed, as Kafka's
	// DefaultKafkaPrincipalBuilder does when no rule applies). Unset, the
	// principal is the certificate's subject DN.
	MapPrincipal func(cert *x509.Certificate) (string, error)
}

// TLSHandshakeTimeout is the default bound of a TLS handshake, server
// side (Config.TLSHandshakeTimeout) and client side.
const TLSHandshakeTimeout = 10 * time.Second

// AnonymousPrincipal is the principal of a connection that has not
// authenticated (Kafka's KafkaPrincipal.ANONYMOUS): PLAINTEXT, and SSL
// without a client certificate.
const AnonymousPrincipal = "User:ANONYMOUS"

// Listener returns the name of the listener the connection came in on
// ("" for Serve and for a nil Conn).
func (c *Conn) Listener() string {
	if c == nil || c.l == nil {
		return ""
	}
	return c.l.Name
}

// Principal is who the connection authenticated as, "User:<name>": the
// SASL user, else the name Listener.MapPrincipal gives a TLS client
// certificate (by default its subject DN), else User:ANONYMOUS. Only
// the reader goroutine (handlers) may call it.
func (c *Conn) Principal() string {
	if c == nil || c.principal == "" {
		return AnonymousPrincipal
	}
	return c.principal
}

// Spliceable reports whether response bytes may go to the socket with
// sendfile: only on a plain TCP connection, not through TLS.
func (c *Conn) Spliceable() bool {
	if c == nil {
		return false
	}
	_, ok := c.nc.(*net.TCPConn)
	return ok
}

// handshakeTLS runs the TLS handshake of a TLS listener's connection
// within Config.TLSHandshakeTimeout (or IdleTimeout if shorter) and takes
// the client certificate's subject, mapped by Listener.MapPrincipal, as
// the principal.
func (c *Conn) handshakeTLS() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	// Kafka's idle expiry (connections.max.idle.ms) covers a channel
	// still in its handshake too: the shorter bound wins.
	tc.SetDeadline(time.Now().Add(min(c.srv.cfg.TLSHandshakeTimeout, c.srv.cfg.IdleTimeout)))
	if err := tc.Handshake(); err != nil {
		metrics.TLSHandshakeFailures.WithLabelValues(c.l.Name).Inc()
		return err
	}
	tc.SetDeadline(time.Time{})
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		c.principal = "User:" + certs[0].Subject.String()
		if c.l.MapPrincipal != nil && c.l.SASL == nil {
			name, err := c.l.MapPrincipal(certs[0])
			if err != nil {
				metrics.AuthFailures.WithLabelValues(c.l.Name, "SSL").Inc()
				return fmt.Errorf("principal of the client certificate: %w", err)
			}
			c.principal = "User:" + name
		}
	}
	if c.l.SASL == nil {
		metrics.AuthSuccesses.WithLabelValues(c.l.Name).Inc()
	}
	return nil
}
