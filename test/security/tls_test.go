package security

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcerts"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestSSLListenerMutualTLS: an SSL listener with ssl.client.auth=required
// serves a franz-go client presenting a certificate of the trusted CA
// (records of 64 KiB, large enough to be spliced on a plain connection,
// come back copied through TLS: no spliced bytes), and refuses a client
// without a certificate.
func TestSSLListenerMutualTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-test")
	srv := ca.Server("broker1")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice"})
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	p := startNode(t, ports[0], map[string]string{
		"listeners":               "PLAINTEXT://" + addr(ports[0]) + ",SSL://" + addr(ports[1]),
		"ssl.keystore.type":       "PEM",
		"ssl.keystore.location":   srv.File,
		"ssl.truststore.type":     "PEM",
		"ssl.truststore.location": ca.File,
		"ssl.client.auth":         "required",
	})
	tlsOpts := func(certs ...tls.Certificate) []kgo.Opt {
		return []kgo.Opt{kgo.SeedBrokers(addr(ports[1])), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, Certificates: certs})}
	}
	values := [][]byte{make([]byte, 64<<10), make([]byte, 64<<10), []byte("small")}
	rand.Read(values[0]) // incompressible: stored (and fetched) at full size
	rand.Read(values[1])
	produceConsume(t, "tls", values, client(t, tlsOpts(alice.Cert)...), tlsOpts(alice.Cert)...)
	if n := metric(t, p, "sluice_fetch_spliced_bytes_total"); n != 0 {
		t.Errorf("%v bytes spliced while the only consumer read through TLS", n)
	}
	// The same reads on the PLAINTEXT listener are spliced, so the check
	// above can fail.
	produceConsume(t, "plain", values, p.Client(t), kgo.SeedBrokers(p.Addr()))
	if n := metric(t, p, "sluice_fetch_spliced_bytes_total"); n == 0 {
		t.Error("no bytes spliced on the PLAINTEXT listener")
	}

	anon := client(t, append(tlsOpts(), kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))...)
	if err := anon.Ping(ctx(t, 5*time.Second)); err == nil {
		t.Error("a client without a certificate was served")
	}
	if n := metric(t, p, "sluice_tls_handshake_failures_total"); n == 0 {
		t.Error("the refused handshake was not counted")
	}
}
