package security

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcerts"
	"github.com/sluice-io/sluice/internal/testproc"
)

// httpsClient trusts ca and presents certs (forced, whatever CAs the
// server names, when force is set).
func httpsClient(ca *testcerts.CA, force bool, certs ...tls.Certificate) *http.Client {
	tc := &tls.Config{RootCAs: ca.Pool, Certificates: certs}
	if force && len(certs) > 0 {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
}

// httpGet requests url with an optional bearer token: the status, the
// body and the transport error.
func httpGet(c *http.Client, url, token string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// protectedPaths are served only with credentials.
var protectedPaths = []string{"/metrics", "/api/v1/node", "/api/v1/cluster", "/status", "/debug/pprof/", "/debug/disk"}

// TestHTTPPortTLSAndToken: a node whose --http port serves TLS
// (sluice.http.ssl.enable with listener.name.http.ssl.*) and asks for a
// bearer token, with client certificates requested: the health checks
// answer without credentials; the console, /api/v1, /metrics, pprof and
// /debug/disk answer 401 without the token or a certificate, 200 with
// either; a certificate of another CA fails the handshake; plain HTTP on
// the port gets nothing. The token is not in the log.
func TestHTTPPortTLSAndToken(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-http")
	srv := ca.Server("broker1")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice"})
	mallory := testcerts.NewCA(t, "other").Client("mallory", pkix.Name{CommonName: "mallory"})
	const token = "http-s3cret-token"
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, testproc.Options{ListenPort: ports[0], HTTPPort: ports[1],
		Env: []string{"SLUICE_FAULT_INJECTION=1"},
		ExtraArgs: []string{"--config", writeProps(t, map[string]string{
			"listeners":                                  "PLAINTEXT://" + addr(ports[0]),
			"sluice.http.ssl.enable":                     "true",
			"sluice.http.debug.enable":                   "true",
			"sluice.http.auth.bearer.token":              token,
			"listener.name.http.ssl.keystore.type":       "PEM",
			"listener.name.http.ssl.keystore.location":   srv.File,
			"listener.name.http.ssl.truststore.type":     "PEM",
			"listener.name.http.ssl.truststore.location": ca.File,
			"listener.name.http.ssl.client.auth":         "requested",
		})}})
	base := "https://" + p.HTTPAddr()
	anon := httpsClient(ca, false)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body, err := httpGet(anon, base+path, ""); err != nil || code != 200 {
			t.Errorf("%s without credentials: %d %q %v", path, code, body, err)
		}
	}
	withCert := httpsClient(ca, false, alice.Cert)
	for _, path := range protectedPaths {
		if code, body, err := httpGet(anon, base+path, ""); err != nil || code != 401 {
			t.Errorf("%s without credentials: %d %v, want 401", path, code, err)
		} else if strings.Contains(body, "sluice_") || strings.Contains(body, "nodeId") {
			t.Errorf("%s without credentials leaked data: %.200q", path, body)
		}
		if code, _, err := httpGet(anon, base+path, "wrong-"+token); err != nil || code != 401 {
			t.Errorf("%s with a wrong token: %d %v, want 401", path, code, err)
		}
		if code, _, err := httpGet(anon, base+path, token); err != nil || code != 200 {
			t.Errorf("%s with the token: %d %v, want 200", path, code, err)
		}
		if code, _, err := httpGet(withCert, base+path, ""); err != nil || code != 200 {
			t.Errorf("%s with a client certificate: %d %v, want 200", path, code, err)
		}
	}
	if code, body, err := httpGet(anon, base+"/metrics", token); err != nil || !strings.Contains(body, "sluice_") {
		t.Errorf("/metrics with the token: %d %v, no sluice_ metric", code, err)
	}
	if code, body, err := httpGet(anon, base+"/api/v1/cluster", token); err != nil || !strings.Contains(body, `"reachable": true`) {
		t.Errorf("/api/v1/cluster with the token: %d %v: %.300s", code, err, body)
	}
	if _, _, err := httpGet(httpsClient(ca, true, mallory.Cert), base+"/healthz", ""); err == nil {
		t.Error("a client certificate of another CA passed the handshake")
	}
	if code, body, err := httpGet(&http.Client{Timeout: 10 * time.Second}, "http://"+p.HTTPAddr()+"/metrics", token); err == nil && code == 200 {
		t.Errorf("plain HTTP to the TLS port was served: %.200q", body)
	}
	if p.LogTail(100000) != "" && strings.Contains(p.LogTail(100000), token) {
		t.Error("the bearer token is in the log")
	}
}

// TestHTTPPortClientCertRequired: with ssl.client.auth=required on the
// HTTP listener (and no token), a probe without a certificate still gets
// the health checks, everything else needs a certificate of the trust
// store.
func TestHTTPPortClientCertRequired(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-http")
	srv := ca.Server("broker1")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice"})
	mallory := testcerts.NewCA(t, "other").Client("mallory", pkix.Name{CommonName: "mallory"})
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, testproc.Options{ListenPort: ports[0], HTTPPort: ports[1],
		ExtraArgs: []string{"--config", writeProps(t, map[string]string{
			"listeners":                          "PLAINTEXT://" + addr(ports[0]),
			"sluice.http.ssl.enable":             "true",
			"ssl.keystore.type":                  "PEM",
			"ssl.keystore.location":              srv.File,
			"ssl.truststore.type":                "PEM",
			"ssl.truststore.location":            ca.File,
			"listener.name.http.ssl.client.auth": "required",
		})}})
	base := "https://" + p.HTTPAddr()
	anon := httpsClient(ca, false)
	if code, _, err := httpGet(anon, base+"/healthz", ""); err != nil || code != 200 {
		t.Errorf("/healthz without a certificate: %d %v", code, err)
	}
	withCert := httpsClient(ca, false, alice.Cert)
	for _, path := range []string{"/metrics", "/api/v1/node"} {
		if code, _, err := httpGet(anon, base+path, ""); err != nil || code != 401 {
			t.Errorf("%s without a certificate: %d %v, want 401", path, code, err)
		}
		if code, _, err := httpGet(withCert, base+path, ""); err != nil || code != 200 {
			t.Errorf("%s with a certificate: %d %v, want 200", path, code, err)
		}
	}
	if _, _, err := httpGet(httpsClient(ca, true, mallory.Cert), base+"/metrics", ""); err == nil {
		t.Error("a client certificate of another CA passed the handshake")
	}
}

// TestHTTPPortBadSettings: inconsistent --http security settings stop
// `sluice serve` at start with a message naming them.
func TestHTTPPortBadSettings(t *testing.T) {
	bin := testproc.Build(t)
	ca := testcerts.NewCA(t, "sluice-http")
	srv := ca.Server("broker1")
	for name, tc := range map[string]struct {
		props map[string]string
		want  string
	}{
		"tls without key store":     {map[string]string{"sluice.http.ssl.enable": "true"}, "sluice.http.ssl.enable=true: listener HTTP: TLS needs a key store"},
		"client auth without trust": {map[string]string{"sluice.http.ssl.enable": "true", "ssl.keystore.type": "PEM", "ssl.keystore.location": srv.File, "listener.name.http.ssl.client.auth": "required"}, "needs a trust store"},
		"http ssl without tls":      {map[string]string{"listener.name.http.ssl.client.auth": "required"}, "sluice.http.ssl.enable is false"},
		"kafka listener named HTTP": {map[string]string{"listeners": "HTTP://127.0.0.1:0", "listener.security.protocol.map": "HTTP:PLAINTEXT"}, "reserved for the --http port"},
		"missing token file":        {map[string]string{"sluice.http.auth.bearer.token.file": "/nonexistent/tokens"}, "sluice.http.auth.bearer.token.file"},
	} {
		t.Run(name, func(t *testing.T) {
			ports, err := testproc.FreePorts(2)
			if err != nil {
				t.Fatal(err)
			}
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(c, bin, "serve", "--data-dir", t.TempDir(), "--listen", addr(ports[0]), "--http", addr(ports[1]),
				"--config", writeProps(t, tc.props))
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("exit %v, output lacks %q:\n%s", err, tc.want, out)
			}
		})
	}
}

// TestHTTPPortClusterConsole: in a cluster whose --http ports all serve
// TLS, ask for a token and require client certificates, a node's console
// reaches the other node's /api/v1/node (over https, with its own
// certificate and the token): both brokers are reachable in
// /api/v1/cluster.
func TestHTTPPortClusterConsole(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-http")
	nodeCert := ca.Server("node")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice"})
	ports, err := testproc.FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	props := writeProps(t, map[string]string{
		"sluice.http.ssl.enable":                     "true",
		"sluice.http.auth.bearer.token":              "cluster-token",
		"listener.name.http.ssl.keystore.type":       "PEM",
		"listener.name.http.ssl.keystore.location":   nodeCert.File,
		"listener.name.http.ssl.truststore.type":     "PEM",
		"listener.name.http.ssl.truststore.location": ca.File,
		"listener.name.http.ssl.client.auth":         "required",
	})
	voters := "1@127.0.0.1:" + strconv.Itoa(ports[2])
	// Node 1 is the only voter, node 2 a broker-only node.
	procs := []*testproc.Proc{
		testproc.Start(t, testproc.Options{NodeID: 1, ListenPort: ports[0], HTTPPort: ports[1], ControllerPort: ports[2],
			ExtraArgs: []string{"--voters", voters, "--config", props}, NoWait: true}),
		testproc.Start(t, testproc.Options{NodeID: 2, ListenPort: ports[3], HTTPPort: ports[4],
			ExtraArgs: []string{"--voters", voters, "--config", props}, NoWait: true}),
	}
	for _, p := range procs {
		if err := p.WaitReady(testproc.DefaultStartTimeout); err != nil {
			t.Fatalf("node %d: %v", p.NodeID(), err)
		}
	}
	c := httpsClient(ca, false, alice.Cert)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var v struct {
			Brokers []struct {
				ID        int32  `json:"id"`
				Reachable bool   `json:"reachable"`
				Error     string `json:"error"`
			} `json:"brokers"`
		}
		code, body, err := httpGet(c, "https://"+procs[0].HTTPAddr()+"/api/v1/cluster", "")
		if err == nil && code == 200 {
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				t.Fatal(err)
			}
			reachable := 0
			for _, b := range v.Brokers {
				if b.Reachable {
					reachable++
				}
			}
			if len(v.Brokers) == 2 && reachable == 2 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/v1/cluster: %d %v %+v", code, err, v.Brokers)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
