package security

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/testcerts"
)

func brokerCfg(props map[string]string) *config.Broker {
	c := config.Defaults()
	for k, v := range props {
		c.Props[k] = v
	}
	return c
}

// TestServerTLS covers the key and trust store forms (file, inline PEM
// whose line breaks a properties file dropped, per-listener overrides)
// and the settings refused at start.
func TestServerTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "t")
	srv := ca.Server("b")
	oneLine := func(b []byte) string { return strings.ReplaceAll(string(b), "\n", " ") }
	enc := filepath.Join(t.TempDir(), "enc.pem")
	os.WriteFile(enc, []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n"+string(srv.CertPEM)), 0o600)
	cases := []struct {
		name  string
		props map[string]string
		auth  tls.ClientAuthType
		err   string
	}{
		{"file", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": srv.File}, tls.NoClientCert, ""},
		{"inline one line", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": oneLine(srv.CertPEM), "ssl.keystore.key": oneLine(srv.KeyPEM),
			"ssl.truststore.type": "PEM", "ssl.truststore.certificates": oneLine(srv.CertPEM), "ssl.client.auth": "requested"}, tls.VerifyClientCertIfGiven, ""},
		{"per listener", map[string]string{"listener.name.ssl.ssl.keystore.type": "PEM", "listener.name.ssl.ssl.keystore.location": srv.File,
			"ssl.keystore.location": "/nonexistent", "listener.name.ssl.ssl.truststore.type": "PEM", "listener.name.ssl.ssl.truststore.location": ca.File,
			"listener.name.ssl.ssl.client.auth": "required"}, tls.RequireAndVerifyClientCert, ""},
		{"no keystore", map[string]string{}, 0, "needs a key store"},
		{"JKS", map[string]string{"ssl.keystore.location": srv.File}, 0, "ssl.keystore.type=JKS: sluice reads PEM key stores only"},
		{"missing file", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"}, 0, "no such file"},
		{"encrypted", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": enc}, 0, "encrypted private keys are not supported"},
		{"key password", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": srv.File, "ssl.key.password": "x"}, 0, "encrypted private keys are not supported"},
		{"no key", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": ca.File}, 0, "want a private key"},
		{"required without truststore", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": srv.File, "ssl.client.auth": "required"}, 0, "needs a trust store"},
		{"garbage truststore", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": srv.File, "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "-----BEGIN CERTIFICATE----- !!! -----END CERTIFICATE-----"}, 0, "illegal base64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc, err := ServerTLS(brokerCfg(c.props), "SSL")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.ClientAuth != c.auth || tc.MinVersion != tls.VersionTLS12 || len(tc.Certificates) != 1 {
				t.Errorf("config: auth %v min %x certs %d", tc.ClientAuth, tc.MinVersion, len(tc.Certificates))
			}
		})
	}
}

// TestClientTLS: the inter-broker client presents the broker's own
// certificate and checks the leader's name unless
// ssl.endpoint.identification.algorithm is empty.
func TestClientTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "t")
	srv := ca.Server("b")
	props := map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": srv.File, "ssl.truststore.type": "PEM", "ssl.truststore.location": ca.File,
		"ssl.enabled.protocols": "TLSv1.3"}
	tc, err := ClientTLS(brokerCfg(props), "SSL")
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Certificates) != 1 || tc.GetClientCertificate == nil || tc.MinVersion != tls.VersionTLS13 {
		t.Errorf("client config: certs %d reloadable %v min %x", len(tc.Certificates), tc.GetClientCertificate != nil, tc.MinVersion)
	}
	// The trust store file may change: ForHost's copies check the chain
	// and the host with the store in use.
	leaf := []*x509.Certificate{mustLeaf(t, srv)}
	if tc.InsecureSkipVerify {
		t.Error("ClientTLS itself skips Go's verification")
	}
	if err := ForHost(tc, "127.0.0.1:9093").VerifyConnection(tls.ConnectionState{PeerCertificates: leaf}); err != nil {
		t.Errorf("the leader's certificate for 127.0.0.1 refused: %v", err)
	}
	if err := ForHost(tc, "elsewhere.example:9093").VerifyConnection(tls.ConnectionState{PeerCertificates: leaf}); err == nil {
		t.Error("a certificate not naming the host was accepted")
	}
	if got := ForHost(tc, "127.0.0.1:9093").ServerName; got != "127.0.0.1" {
		t.Errorf("ServerName %q", got)
	}
	props["ssl.endpoint.identification.algorithm"] = ""
	tc, err = ClientTLS(brokerCfg(props), "SSL")
	if err != nil {
		t.Fatal(err)
	}
	if !tc.InsecureSkipVerify || tc.VerifyConnection == nil {
		t.Fatal("no chain verification without the name check")
	}
	other := testcerts.NewCA(t, "other").Server("x")
	if err := tc.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{mustLeaf(t, other)}}); err == nil {
		t.Error("a certificate of another CA was accepted")
	}
	if err := tc.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{mustLeaf(t, srv)}}); err != nil {
		t.Errorf("own CA's certificate refused: %v", err)
	}
}

func mustLeaf(t *testing.T, is *testcerts.Issued) *x509.Certificate {
	c, err := x509.ParseCertificate(is.Cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}
