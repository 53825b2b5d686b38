package security

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcerts"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestPrincipalMappingRulesACLs: with
// listener.name.ssl.ssl.principal.mapping.rules (KIP-371) a client
// certificate CN=alice,OU=eng,O=corp is the principal User:alice, so the
// ACL naming User:alice lets her produce to orders and the absence of one
// refuses payments; CN=admin,O=corp maps to the super user User:admin.
func TestPrincipalMappingRulesACLs(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-test")
	srv := ca.Server("broker1")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"corp"}})
	admin := ca.Client("admin", pkix.Name{CommonName: "Admin", Organization: []string{"corp"}})
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	startNode(t, ports[0], map[string]string{
		"listeners":               "PLAINTEXT://" + addr(ports[0]) + ",SSL://" + addr(ports[1]),
		"ssl.keystore.type":       "PEM",
		"ssl.keystore.location":   srv.File,
		"ssl.truststore.type":     "PEM",
		"ssl.truststore.location": ca.File,
		"ssl.client.auth":         "required",
		"listener.name.ssl.ssl.principal.mapping.rules": `RULE:^CN=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT`,
		"authorizer.class.name":                         "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		// ANONYMOUS: the readiness probe on the PLAINTEXT listener.
		"super.users": "User:admin;User:ANONYMOUS",
	})
	as := func(cert tls.Certificate, extra ...kgo.Opt) *kgo.Client {
		return client(t, append([]kgo.Opt{kgo.SeedBrokers(addr(ports[1])), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{cert}})}, extra...)...)
	}
	c := ctx(t, 60*time.Second)
	adm := kadm.NewClient(as(admin.Cert))
	for _, topic := range []string{"orders", "payments"} {
		if _, err := adm.CreateTopic(c, 1, 1, nil, topic); err != nil {
			t.Fatalf("admin (User:admin by the rules) creating %s: %v", topic, err)
		}
	}
	res, err := adm.CreateACLs(c, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpWrite))
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	cl := as(alice.Cert, kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	if err := cl.ProduceSync(c, &kgo.Record{Topic: "orders", Value: []byte("o")}).FirstErr(); err != nil {
		t.Fatalf("alice (User:alice) producing to orders: %v", err)
	}
	pctx, cancel := context.WithTimeout(c, 10*time.Second)
	err = cl.ProduceSync(pctx, &kgo.Record{Topic: "payments", Value: []byte("p")}).FirstErr()
	cancel()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice producing to payments: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// TestBadPrincipalMappingRulesStop: a rule Kafka's SslPrincipalMapper
// rejects stops `sluice serve` at start with an error naming the key.
func TestBadPrincipalMappingRulesStop(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-test")
	srv := ca.Server("broker1")
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	props := writeProps(t, map[string]string{
		"listeners":             "PLAINTEXT://" + addr(ports[0]) + ",SSL://" + addr(ports[1]),
		"ssl.keystore.type":     "PEM",
		"ssl.keystore.location": srv.File,
		"listener.name.ssl.ssl.principal.mapping.rules": `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U`,
	})
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, testproc.Build(t), "serve", "--listen", addr(ports[0]), "--data-dir", t.TempDir(), "--http", "127.0.0.1:0", "--config", props)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if cctx.Err() != nil || err == nil {
		t.Fatalf("serve with bad rules: %v, want a non-zero exit; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "listener.name.ssl.ssl.principal.mapping.rules") {
		t.Errorf("the error does not name the key:\n%s", out.String())
	}
}
