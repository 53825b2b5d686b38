package status

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcerts"
)

// okHandler answers 200 "ok" on every path.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })

// get requests path with an optional bearer token and returns the status
// and WWW-Authenticate header.
func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// TestAuthBearer: with tokens, the health paths answer without
// credentials, every other path (/debug/disk included) needs one of the
// tokens, and a refusal carries a Bearer challenge.
func TestAuthBearer(t *testing.T) {
	a := Auth{Tokens: StaticTokens("s3cret", "other-token")}
	srv := httptest.NewServer(a.Protect(okHandler))
	defer srv.Close()
	c := srv.Client()
	for _, p := range HealthPaths {
		if code, _ := get(t, c, srv.URL+p, ""); code != 200 {
			t.Errorf("%s without a token: %d", p, code)
		}
	}
	for _, p := range []string{"/", "/status", "/metrics", "/api/v1/cluster", "/debug/pprof/", "/debug/disk", "/healthz/x", "/readyz2"} {
		for _, bad := range []string{"", "Bearer", "Bearer ", "Bearer s3cre", "Bearer s3cret2", "Basic czNjcmV0", "s3cret"} {
			code, chal := get(t, c, srv.URL+p, bad)
			if code != http.StatusUnauthorized || !strings.HasPrefix(chal, "Bearer") {
				t.Errorf("%s with %q: %d %q, want 401 with a Bearer challenge", p, bad, code, chal)
			}
		}
		for _, good := range []string{"Bearer s3cret", "bearer other-token", "Bearer  s3cret "} {
			if code, _ := get(t, c, srv.URL+p, good); code != 200 {
				t.Errorf("%s with %q: %d", p, good, code)
			}
		}
	}
}

// TestAuthOpen: without tokens nor client certificates the port is open,
// as before the settings existed.
func TestAuthOpen(t *testing.T) {
	for _, a := range []Auth{{}, {Tokens: StaticTokens()}, {Tokens: StaticTokens(" ")}} {
		srv := httptest.NewServer(a.Protect(okHandler))
		if code, _ := get(t, srv.Client(), srv.URL+"/metrics", ""); code != 200 {
			t.Errorf("%+v: /metrics %d", a, code)
		}
		srv.Close()
	}
}

// tlsServer serves a.Protect(okHandler) over TLS requesting (not
// requiring) client certificates of ca, as cmd/sluice does.
func tlsServer(t *testing.T, ca *testcerts.CA, a Auth) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(a.Protect(okHandler))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server("http").Cert}, ClientCAs: ca.Pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// tlsClient trusts ca and presents certs.
func tlsClient(ca *testcerts.CA, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: certs}}}
}

// TestAuthClientCertificate: ssl.client.auth=requested makes a verified
// client certificate a credential besides the token; required makes it
// the only one, health checks excepted; a certificate of another CA fails
// the handshake.
func TestAuthClientCertificate(t *testing.T) {
	ca := testcerts.NewCA(t, "http-ca")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice"})
	mallory := testcerts.NewCA(t, "other-ca").Client("mallory", pkix.Name{CommonName: "mallory"})

	requested := tlsServer(t, ca, Auth{Tokens: StaticTokens("tok"), CertAccepted: true})
	if code, _ := get(t, tlsClient(ca, alice.Cert), requested.URL+"/metrics", ""); code != 200 {
		t.Errorf("requested, certificate: %d", code)
	}
	if code, _ := get(t, tlsClient(ca), requested.URL+"/metrics", "Bearer tok"); code != 200 {
		t.Errorf("requested, token: %d", code)
	}
	if code, _ := get(t, tlsClient(ca), requested.URL+"/metrics", ""); code != 401 {
		t.Errorf("requested, nothing: %d", code)
	}

	required := tlsServer(t, ca, Auth{Tokens: StaticTokens("tok"), CertAccepted: true, CertRequired: true})
	if code, _ := get(t, tlsClient(ca), required.URL+"/healthz", ""); code != 200 {
		t.Errorf("required, health without certificate: %d", code)
	}
	if code, _ := get(t, tlsClient(ca), required.URL+"/metrics", "Bearer tok"); code != 401 {
		t.Errorf("required, token without certificate: %d", code)
	}
	if code, _ := get(t, tlsClient(ca, alice.Cert), required.URL+"/metrics", ""); code != 200 {
		t.Errorf("required, certificate: %d", code)
	}
	// Go's client sends no certificate the server's CA list does not
	// name: force it, the handshake must fail.
	force := tlsClient(ca)
	force.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &mallory.Cert, nil
	}
	if _, err := force.Get(required.URL + "/healthz"); err == nil {
		t.Error("a certificate of another CA was accepted")
	}
}

// TestTokenFile: tokens are read one per line, re-read when the file
// changes, and an emptied or removed file keeps the last tokens.
func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(s string, age time.Duration) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		// Distinct modification times whatever the file system's
		// granularity.
		mt := time.Now().Add(-age)
		os.Chtimes(path, mt, mt)
	}
	write("\n# comment\n", time.Hour)
	if _, err := OpenTokenFile(path); err == nil {
		t.Fatal("a file without tokens was accepted")
	}
	if _, err := OpenTokenFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing file was accepted")
	}
	write("one\n  two  \n# three\n", time.Hour)
	f, err := OpenTokenFile(path, "static")
	if err != nil {
		t.Fatal(err)
	}
	a := Auth{Tokens: f.Tokens}
	srv := httptest.NewServer(a.Protect(okHandler))
	defer srv.Close()
	check := func(phase string, want map[string]int) {
		t.Helper()
		for tok, code := range want {
			if got, _ := get(t, srv.Client(), srv.URL+"/metrics", "Bearer "+tok); got != code {
				t.Errorf("%s: token %q: %d, want %d", phase, tok, got, code)
			}
		}
	}
	check("start", map[string]int{"one": 200, "two": 200, "static": 200, "# three": 401, "three": 401})
	write("three\n", time.Minute)
	time.Sleep(1100 * time.Millisecond)
	check("rotated", map[string]int{"one": 401, "two": 401, "static": 200, "three": 200})
	write("", 0)
	time.Sleep(1100 * time.Millisecond)
	check("emptied", map[string]int{"three": 200, "one": 401})
	os.Remove(path)
	time.Sleep(1100 * time.Millisecond)
	check("removed", map[string]int{"three": 200, "one": 401})
}

// TestGetNodeTLSToken: with PeerTLS and PeerToken, a node's console
// fetches the other nodes' /api/v1/node over https with the token.
func TestGetNodeTLSToken(t *testing.T) {
	ca := testcerts.NewCA(t, "http-ca")
	var auth string
	srv := httptest.NewUnstartedServer(Auth{Tokens: StaticTokens("tok")}.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		writeJSON(w, NodeView{NodeID: 2})
	})))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server("http").Cert}}
	srv.StartTLS()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	// Only the peer client of New's Server, without its broker.
	peerClient := func(tc *tls.Config, token func() string) *Server {
		return &Server{peerTLS: tc, peerToken: token, peerTimeout: 5 * time.Second,
			client: &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}}
	}
	s := peerClient(&tls.Config{RootCAs: ca.Pool}, func() string { return "tok" })
	v, err := s.getNode(context.Background(), addr)
	if err != nil || v.NodeID != 2 || auth != "Bearer tok" {
		t.Fatalf("getNode: %+v %v, Authorization %q", v, err, auth)
	}
	if _, err := peerClient(&tls.Config{RootCAs: ca.Pool}, nil).getNode(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("getNode without the token: %v, want 401", err)
	}
	if _, err := peerClient(nil, nil).getNode(context.Background(), addr); err == nil {
		t.Error("plain HTTP to a TLS peer succeeded")
	}
}
