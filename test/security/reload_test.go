package security

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcerts"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestKeyStoreReload: a node whose SSL listener started with certificate
// A serves certificate B to new connections once ssl.keystore.location
// holds B, without a restart, while a client connected before keeps
// producing; a broken key store file keeps B in use and the node up.
func TestKeyStoreReload(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-test")
	a, b := ca.Server("cert-a"), ca.Server("cert-b")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice"})
	keyFile := filepath.Join(t.TempDir(), "keystore.pem")
	write := func(path string, data []byte) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string) []byte {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	write(keyFile, read(a.File))
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	p := startNode(t, ports[0], map[string]string{
		"listeners":               "PLAINTEXT://" + addr(ports[0]) + ",SSL://" + addr(ports[1]),
		"ssl.keystore.type":       "PEM",
		"ssl.keystore.location":   keyFile,
		"ssl.truststore.type":     "PEM",
		"ssl.truststore.location": ca.File,
		"ssl.client.auth":         "required",
	})
	cc := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{alice.Cert}}
	served := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", addr(ports[1]), cc)
		if err != nil {
			t.Fatalf("TLS connection: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "cert-a" {
		t.Fatalf("served %q at start, want cert-a", got)
	}
	old := client(t, kgo.SeedBrokers(addr(ports[1])), kgo.DialTLSConfig(cc), kgo.AllowAutoTopicCreation())
	c := ctx(t, 60*time.Second)
	if err := old.ProduceSync(c, &kgo.Record{Topic: "reload", Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	write(keyFile, read(b.File))
	deadline := time.Now().Add(10 * time.Second)
	for served() != "cert-b" {
		if time.Now().After(deadline) {
			t.Fatal("still serving cert-a 10 s after the key store file changed")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := old.ProduceSync(c, &kgo.Record{Topic: "reload", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("client connected before the reload: %v", err)
	}

	write(keyFile, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n"))
	time.Sleep(1500 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if got := served(); got != "cert-b" {
			t.Fatalf("served %q with a broken key store file, want cert-b kept", got)
		}
	}
	fresh := client(t, kgo.SeedBrokers(addr(ports[1])), kgo.DialTLSConfig(cc))
	if err := fresh.ProduceSync(c, &kgo.Record{Topic: "reload", Value: []byte("broken file")}).FirstErr(); err != nil {
		t.Fatalf("new client with a broken key store file: %v", err)
	}
	nodeHealthy(t, p, "after a broken key store file")
	logText := string(read(p.LogPath()))
	if n := strings.Count(logText, "TLS store changed but cannot be used"); n != 1 {
		t.Errorf("%d warnings for one broken key store file, want 1", n)
	}
	if !strings.Contains(logText, "TLS key store reloaded") {
		t.Error("the reload was not logged")
	}
}
