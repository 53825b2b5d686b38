package cli

import (
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/testcerts"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestCommandConfigSSL: --command-config with security.protocol=SSL, a PEM
// trust store and a PEM key store reaches an SSL listener that requires
// client certificates; without the key store, or without the file, the
// same command cannot reach it.
func TestCommandConfigSSL(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-cli-test")
	srv := ca.Server("broker1")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice"})
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	plain, ssl := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	server := write("server.properties", "listeners=PLAINTEXT://"+plain+",SSL://"+ssl+"\n"+
		"ssl.keystore.type=PEM\nssl.keystore.location="+srv.File+"\n"+
		"ssl.truststore.type=PEM\nssl.truststore.location="+ca.File+"\nssl.client.auth=required\n")
	testproc.Start(t, testproc.Options{ListenPort: ports[0], HTTPPort: -1, ExtraArgs: []string{"--config", server}})

	full := write("client.properties", "# an ops client\nsecurity.protocol=SSL\nssl.truststore.location="+ca.File+"\nssl.keystore.location="+alice.File+"\n")
	ok(t, "", "topic", "create", "secure", "--bootstrap", ssl, "--command-config", full)
	r := ok(t, "", "topic", "list", "--bootstrap", ssl, "--command-config", full)
	if row(r.stdout, "secure") == nil {
		t.Errorf("topic list over TLS:\n%s", r)
	}

	noCert := write("nocert.properties", "security.protocol=SSL\nssl.truststore.location="+ca.File+"\n")
	r = fails(t, 1, "cannot reach bootstrap "+ssl, "topic", "list", "--bootstrap", ssl, "--command-config", noCert, "--timeout", "5s")
	fails(t, 1, "cannot reach bootstrap "+ssl, "topic", "list", "--bootstrap", ssl, "--timeout", "5s")
	fails(t, 1, "--command-config: open "+filepath.Join(dir, "missing"), "topic", "list", "--bootstrap", ssl, "--command-config", filepath.Join(dir, "missing"))
	if strings.Contains(r.stderr, "panic") {
		t.Error(r)
	}
}
