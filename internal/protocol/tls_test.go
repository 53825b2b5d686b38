package protocol

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcerts"
)

// connInfo is what a handler saw of its connection.
type connInfo struct {
	principal, listener string
	spliceable          bool
}

// startListener serves a registry whose Metadata handler reports its
// connection on seen, on a loopback listener l.
func startListener(t *testing.T, cfg Config, l Listener) (*Server, string, chan connInfo) {
	t.Helper()
	seen := make(chan connInfo, 10)
	reg := NewRegistry()
	reg.Register(Handler{Key: 3, MinVersion: 0, MaxVersion: 12, Serve: func(r *Request) Reply {
		seen <- connInfo{r.Conn.Principal(), r.Conn.Listener(), r.Conn.Spliceable()}
		return Reply{Resp: r.Body.ResponseKind()}
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(cfg, reg)
	go s.ServeListener(ln, l)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String(), seen
}

func metadataReq() kmsg.Request {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	return req
}

// TestTLSListener: a TLS listener requiring client certificates serves a
// client with one (principal User:<subject DN>, no splicing), refuses a
// client without one, and closes a connection that does not complete its
// handshake within the timeout. A plain listener is anonymous and splices.
func TestTLSListener(t *testing.T) {
	ca := testcerts.NewCA(t, "test")
	srvCert := ca.Server("broker")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"corp"}})
	s, addr, seen := startListener(t, Config{TLSHandshakeTimeout: 300 * time.Millisecond}, Listener{Name: "SSL", TLS: &tls.Config{
		Certificates: []tls.Certificate{srvCert.Cert}, ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cl := NewClient(addr, "test")
	cl.TLS = &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{alice.Cert}, ServerName: "127.0.0.1"}
	defer cl.Close()
	if _, err := cl.Request(ctx, metadataReq()); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	got := <-seen
	if want := (connInfo{"User:CN=alice,OU=eng,O=corp", "SSL", false}); got != want {
		t.Errorf("connection %+v, want %+v", got, want)
	}

	anon := NewClient(addr, "test")
	anon.TLS = &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}
	defer anon.Close()
	if _, err := anon.Request(ctx, metadataReq()); err == nil {
		t.Error("client without a certificate was served")
	}

	wrongName := NewClient(addr, "test")
	wrongName.TLS = &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{alice.Cert}, ServerName: "elsewhere.example"}
	defer wrongName.Close()
	if _, err := wrongName.Request(ctx, metadataReq()); err == nil {
		t.Error("client accepted a server certificate without its name")
	}

	// A client that connects and says nothing is cut off after the
	// handshake timeout.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	t0 := time.Now()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Error("stalled handshake: read data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("stalled handshake: the server kept the connection for 5 s")
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("stalled handshake closed after %v", d)
	}
	for i := 0; s.NumConns() > 1 && i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
	}

	_, paddr, pseen := startListener(t, Config{}, Listener{Name: "PLAINTEXT"})
	pc := NewClient(paddr, "test")
	defer pc.Close()
	if _, err := pc.Request(ctx, metadataReq()); err != nil {
		t.Fatal(err)
	}
	if got, want := <-pseen, (connInfo{"User:ANONYMOUS", "PLAINTEXT", true}); got != want {
		t.Errorf("plain connection %+v, want %+v", got, want)
	}
}

// TestTLSMapPrincipal: Listener.MapPrincipal names the principal of a
// client certificate (User:<name>); when it fails (no
// ssl.principal.mapping.rules rule applies) the connection is closed
// before any request is served.
func TestTLSMapPrincipal(t *testing.T) {
	ca := testcerts.NewCA(t, "test")
	srvCert := ca.Server("broker")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"corp"}})
	other := ca.Client("other", pkix.Name{Organization: []string{"corp"}})
	_, addr, seen := startListener(t, Config{TLSHandshakeTimeout: time.Second}, Listener{Name: "SSL",
		TLS: &tls.Config{Certificates: []tls.Certificate{srvCert.Cert}, ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert},
		MapPrincipal: func(c *x509.Certificate) (string, error) {
			if c.Subject.CommonName == "" {
				return "", errors.New("no rule applies")
			}
			return c.Subject.CommonName, nil
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := NewClient(addr, "test")
	cl.TLS = &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{alice.Cert}, ServerName: "127.0.0.1"}
	defer cl.Close()
	if _, err := cl.Request(ctx, metadataReq()); err != nil {
		t.Fatal(err)
	}
	if got := (<-seen).principal; got != "User:alice" {
		t.Errorf("principal %q, want User:alice", got)
	}
	oc := NewClient(addr, "test")
	oc.TLS = &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{other.Cert}, ServerName: "127.0.0.1"}
	defer oc.Close()
	if _, err := oc.Request(ctx, metadataReq()); err == nil {
		t.Error("a certificate no rule maps was served")
	}
	select {
	case got := <-seen:
		t.Errorf("a request of the unmapped certificate reached the handler: %+v", got)
	default:
	}
}
