package security

import (
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcerts"
)

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// echoServer serves tc on loopback, echoing what each connection sends
// and reporting the subject of each client certificate on clients.
func echoServer(t *testing.T, tc *tls.Config) (string, chan string) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	clients := make(chan string, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tcn := c.(*tls.Conn)
				if tcn.Handshake() != nil {
					return
				}
				if pc := tcn.ConnectionState().PeerCertificates; len(pc) > 0 {
					clients <- pc[0].Subject.CommonName
				}
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), clients
}

// dialCN connects with cc and returns the connection and the common name
// of the server's certificate.
func dialCN(t *testing.T, addr string, cc *tls.Config) (*tls.Conn, string, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cc)
	if err != nil {
		return nil, "", err
	}
	t.Cleanup(func() { c.Close() })
	return c, c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

func echoes(t *testing.T, c *tls.Conn, what string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("%s: %q %v", what, b, err)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// rewrite replaces a store file in place and waits out reloadInterval.
func rewrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(reloadInterval + 100*time.Millisecond)
}

// TestServerTLSReload: a listener started with certificate A serves B to
// new connections once its key store file holds B, while a connection
// opened with A keeps working; a broken file keeps B in use (one warning
// per change, no crash); a trust store file gaining a second CA admits
// that CA's clients.
func TestServerTLSReload(t *testing.T) {
	var logs lockedBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	ca, ca2 := testcerts.NewCA(t, "one"), testcerts.NewCA(t, "two")
	a, b := ca.Server("cert-a"), ca.Server("cert-b")
	dir := t.TempDir()
	keyFile, trustFile := filepath.Join(dir, "keystore.pem"), filepath.Join(dir, "truststore.pem")
	rewrite(t, keyFile, readFile(t, a.File))
	rewrite(t, trustFile, readFile(t, ca.File))
	tc, err := ServerTLS(brokerCfg(map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": keyFile,
		"ssl.truststore.type": "PEM", "ssl.truststore.location": trustFile, "ssl.client.auth": "required"}), "SSL")
	if err != nil {
		t.Fatal(err)
	}
	addr, clients := echoServer(t, tc)
	alice := ca.Client("alice", pkix.Name{CommonName: "alice"})
	cc := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{alice.Cert}}

	old, cn, err := dialCN(t, addr, cc)
	if err != nil || cn != "cert-a" {
		t.Fatalf("first connection: %q %v, want cert-a", cn, err)
	}
	echoes(t, old, "connection with A")

	rewrite(t, keyFile, readFile(t, b.File))
	c, cn, err := dialCN(t, addr, cc)
	if err != nil || cn != "cert-b" {
		t.Fatalf("after the rewrite: %q %v, want cert-b", cn, err)
	}
	echoes(t, c, "connection with B")
	echoes(t, old, "connection with A after the reload")

	rewrite(t, keyFile, []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n"))
	for i := 0; i < 2; i++ {
		c, cn, err = dialCN(t, addr, cc)
		if err != nil || cn != "cert-b" {
			t.Fatalf("with a broken key store: %q %v, want cert-b kept", cn, err)
		}
		echoes(t, c, "connection after the broken rewrite")
		time.Sleep(reloadInterval + 100*time.Millisecond)
	}
	if n := strings.Count(logs.String(), "cannot be used"); n != 1 {
		t.Errorf("%d warnings for one broken file, want 1:\n%s", n, logs.String())
	}

	// Trust store: a client of the second CA is refused, then admitted
	// once the file holds both CAs.
	bob := ca2.Client("bob", pkix.Name{CommonName: "bob"})
	bc := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{bob.Cert}}
	if c, _, err := dialCN(t, addr, bc); err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte("x"))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a client of an untrusted CA was served")
		}
	}
	rewrite(t, trustFile, append(readFile(t, ca.File), readFile(t, ca2.File)...))
	c, _, err = dialCN(t, addr, bc)
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c, "client of the added CA")
	for got := range clients {
		if got == "bob" {
			break
		}
		if got != "alice" {
			t.Fatalf("client certificate %q, want alice, then bob", got)
		}
	}
}

// TestClientTLSReload: the inter-broker client presents the certificate
// its key store file holds now, and trusts its trust store file's CAs now.
func TestClientTLSReload(t *testing.T) {
	ca, ca2 := testcerts.NewCA(t, "one"), testcerts.NewCA(t, "two")
	srv := ca2.Server("leader")
	a, b := ca.Client("a", pkix.Name{CommonName: "broker-a"}), ca.Client("b", pkix.Name{CommonName: "broker-b"})
	addr, clients := echoServer(t, &tls.Config{Certificates: []tls.Certificate{srv.Cert}, ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert})
	dir := t.TempDir()
	keyFile, trustFile := filepath.Join(dir, "keystore.pem"), filepath.Join(dir, "truststore.pem")
	rewrite(t, keyFile, append(append([]byte(nil), a.KeyPEM...), a.CertPEM...))
	rewrite(t, trustFile, readFile(t, ca.File))
	cc, err := ClientTLS(brokerCfg(map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": keyFile,
		"ssl.truststore.type": "PEM", "ssl.truststore.location": trustFile}), "SSL")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dialCN(t, addr, ForHost(cc, addr)); err == nil {
		t.Fatal("the leader's certificate of a CA not (yet) trusted was accepted")
	}
	rewrite(t, trustFile, readFile(t, ca2.File))
	rewrite(t, keyFile, append(append([]byte(nil), b.KeyPEM...), b.CertPEM...))
	c, cn, err := dialCN(t, addr, ForHost(cc, addr))
	if err != nil || cn != "leader" {
		t.Fatalf("after the rewrite: %q %v", cn, err)
	}
	echoes(t, c, "inter-broker connection")
	if got := <-clients; got != "broker-b" {
		t.Errorf("the leader saw client certificate %q, want broker-b", got)
	}
}

// TestServerTLSClientAuthChange: ClientAuth changed on ServerTLS's config
// after it was built (as the --http port does) holds for the reloading
// per-connection configs too.
func TestServerTLSClientAuthChange(t *testing.T) {
	ca := testcerts.NewCA(t, "one")
	dir := t.TempDir()
	keyFile, trustFile := filepath.Join(dir, "keystore.pem"), filepath.Join(dir, "truststore.pem")
	rewrite(t, keyFile, readFile(t, ca.Server("a").File))
	rewrite(t, trustFile, readFile(t, ca.File))
	tc, err := ServerTLS(brokerCfg(map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": keyFile,
		"ssl.truststore.type": "PEM", "ssl.truststore.location": trustFile, "ssl.client.auth": "required"}), "HTTP")
	if err != nil {
		t.Fatal(err)
	}
	tc.ClientAuth = tls.VerifyClientCertIfGiven
	c, err := tc.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil || c.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Fatalf("per-connection ClientAuth %v %v, want VerifyClientCertIfGiven", c.ClientAuth, err)
	}
}
