package node

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/testcerts"
)

// TestHTTPSecurityFrom: the HTTP listener's ssl.client.auth becomes a
// per-request policy over a handshake that only requests certificates,
// listener.name.http.* wins over ssl.*, and tokens come from both
// settings.
func TestHTTPSecurityFrom(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	srv := ca.Server("node")
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("from-file\n"), 0o600)
	withProps := func(props map[string]string) *config.Broker {
		cfg := config.Defaults()
		cfg.Props = props
		return cfg
	}
	tlsProps := func(extra map[string]string) map[string]string {
		p := map[string]string{"sluice.http.ssl.enable": "true", "ssl.keystore.type": "PEM", "ssl.keystore.location": srv.File,
			"ssl.truststore.type": "PEM", "ssl.truststore.location": ca.File, "ssl.client.auth": "required"}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}

	hs, err := httpSecurityFrom(withProps(map[string]string{}))
	if err != nil || hs.tls != nil || hs.auth.Tokens != nil || hs.peerToken != nil {
		t.Fatalf("defaults: %+v %v", hs, err)
	}
	hs, err = httpSecurityFrom(withProps(tlsProps(nil)))
	if err != nil || hs.tls == nil || hs.tls.ClientAuth != tls.VerifyClientCertIfGiven || !hs.auth.CertRequired || hs.peerTLS == nil {
		t.Fatalf("ssl.client.auth=required: %+v %v", hs, err)
	}
	hs, err = httpSecurityFrom(withProps(tlsProps(map[string]string{"listener.name.http.ssl.client.auth": "requested"})))
	if err != nil || hs.auth.CertRequired || !hs.auth.CertAccepted {
		t.Fatalf("listener.name.http.ssl.client.auth=requested over ssl.client.auth=required: %+v %v", hs.auth, err)
	}
	hs, err = httpSecurityFrom(withProps(tlsProps(map[string]string{"listener.name.http.ssl.client.auth": "none"})))
	if err != nil || hs.tls.ClientAuth != tls.NoClientCert || hs.auth.CertAccepted {
		t.Fatalf("listener.name.http.ssl.client.auth=none: %+v %v", hs.auth, err)
	}
	hs, err = httpSecurityFrom(withProps(map[string]string{"sluice.http.auth.bearer.token": "static", "sluice.http.auth.bearer.token.file": tokens}))
	if err != nil || len(hs.auth.Tokens()) != 2 || hs.peerToken() != "static" {
		t.Fatalf("tokens: %v", err)
	}
	for _, bad := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"sluice.http.ssl.enable": "true"}, "needs a key store"},
		{map[string]string{"sluice.http.ssl.enable": "true", "ssl.keystore.type": "PEM", "ssl.keystore.location": srv.File, "ssl.client.auth": "requested"}, "needs a trust store"},
		{map[string]string{"listener.name.http.ssl.keystore.location": srv.File}, "sluice.http.ssl.enable is false"},
		{map[string]string{"sluice.http.auth.bearer.token.file": filepath.Join(t.TempDir(), "none")}, "sluice.http.auth.bearer.token.file"},
		{map[string]string{"listeners": "HTTP://127.0.0.1:9092", "listener.security.protocol.map": "HTTP:PLAINTEXT"}, "reserved"},
	} {
		if _, err := httpSecurityFrom(withProps(bad.props)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want an error with %q", bad.props, err, bad.want)
		}
	}
}
