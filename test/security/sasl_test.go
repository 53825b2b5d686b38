package security

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluice-io/sluice/internal/testproc"
)

const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`

// saslNode starts a node with a SASL_PLAINTEXT listener serving PLAIN
// (users admin and alice) and SCRAM; it returns the node and the SASL
// listener's address.
func saslNode(t *testing.T, extra map[string]string) (*testproc.Proc, string) {
	t.Helper()
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{
		"listeners":               "PLAINTEXT://" + addr(ports[0]) + ",SASL_PLAINTEXT://" + addr(ports[1]),
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		"connection.failed.authentication.delay.ms":           "300",
	}
	for k, v := range extra {
		props[k] = v
	}
	return startNode(t, ports[0], props), addr(ports[1])
}

// TestSASLPlain: PLAIN with the right password produces and consumes;
// with a wrong one the client gets SASL_AUTHENTICATION_FAILED (after the
// configured delay), nothing is produced, and the failure is counted.
func TestSASLPlain(t *testing.T) {
	p, saslAddr := saslNode(t, nil)
	alice := []kgo.Opt{kgo.SeedBrokers(saslAddr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}
	produceConsume(t, "plain-ok", [][]byte{[]byte("one"), []byte("two")}, client(t, alice...), alice...)

	adm := kadm.NewClient(p.Client(t))
	c := ctx(t, 30*time.Second)
	if _, err := adm.CreateTopic(c, 1, 1, nil, "plain-bad"); err != nil {
		t.Fatal(err)
	}
	bad := client(t, kgo.SeedBrokers(saslAddr), kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()),
		kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	t0 := time.Now()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(c, bad)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a request with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("failed authentication answered after %v, before connection.failed.authentication.delay.ms", d)
	}
	pctx, cancel := context.WithTimeout(c, 3*time.Second)
	defer cancel()
	if err := bad.ProduceSync(pctx, &kgo.Record{Topic: "plain-bad", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("produce with a wrong password succeeded")
	}
	ends, err := adm.ListEndOffsets(c, "plain-bad")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("plain-bad", 0); o.Offset != 0 {
		t.Errorf("end offset %d after a failed authentication, want 0", o.Offset)
	}
	if n := metric(t, p, "sluice_failed_authentication_total"); n < 1 {
		t.Errorf("sluice_failed_authentication_total = %v", n)
	}
}

// TestSASLRequestBeforeAuthentication: ApiVersions is answered before
// authentication, any other request closes the connection, as in Kafka.
func TestSASLRequestBeforeAuthentication(t *testing.T) {
	_, saslAddr := saslNode(t, nil)
	nc, err := net.Dial("tcp", saslAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	send := func(req kmsg.Request, corr int32) {
		t.Helper()
		b := binary.BigEndian.AppendUint16([]byte{0, 0, 0, 0}, uint16(req.Key()))
		b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
		b = binary.BigEndian.AppendUint32(b, uint32(corr))
		b = binary.BigEndian.AppendUint16(b, 1)
		b = append(b, 't')
		if req.IsFlexible() {
			b = append(b, 0)
		}
		b = req.AppendTo(b)
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(0)
	send(av, 1)
	var hdr [8]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		t.Fatalf("ApiVersions before authentication: %v", err)
	}
	if _, err := io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(hdr[:]))-4); err != nil {
		t.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(1)
	send(md, 2)
	n, err := nc.Read(hdr[:])
	if err == nil || n > 0 {
		t.Fatalf("Metadata before authentication: read %d bytes, err %v; want the connection closed", n, err)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("Metadata before authentication: the connection stayed open")
	}
}

// TestSASLKcat drives the SASL listener with librdkafka (kcat): PLAIN,
// and SCRAM-SHA-256 with a bootstrap credential (librdkafka's SCRAM
// client-final nonce differs from franz-go's, security.scramServer).
func TestSASLKcat(t *testing.T) {
	kcat := testproc.RequireTool(t, "kcat")
	_, saslAddr := saslNode(t, map[string]string{"sluice.scram.bootstrap.credentials": "SCRAM-SHA-256=[name=carol,password=carol-scram]"})
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := func(pass string, extra ...string) []string {
		return append([]string{"-b", saslAddr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
			"-X", "sasl.username=alice", "-X", "sasl.password=" + pass, "-X", "topic.metadata.refresh.interval.ms=100", "-t", "kcat"}, extra...)
	}
	prod := exec.CommandContext(c, kcat, args("alice-secret", "-P", "-X", "allow.auto.create.topics=true")...)
	prod.Stdin = strings.NewReader("k1\nk2\n")
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(c, kcat, args("alice-secret", "-C", "-e", "-o", "beginning", "-f", "%s\n")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "k1\nk2\n") {
		t.Fatalf("kcat consume: %v\n%s", err, out)
	}
	scramArgs := []string{"-b", saslAddr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256",
		"-X", "sasl.username=carol", "-X", "sasl.password=carol-scram", "-t", "kcat", "-C", "-e", "-o", "beginning", "-f", "%s\n"}
	for i := 0; ; i++ { // the bootstrap credential is created just after start
		out, err = exec.CommandContext(c, kcat, scramArgs...).CombinedOutput()
		if err == nil && strings.Contains(string(out), "k1\nk2\n") {
			break
		}
		if i == 20 {
			t.Fatalf("kcat SCRAM-SHA-256 consume: %v\n%s", err, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
	out, err = exec.CommandContext(c, kcat, args("wrong", "-L", "-m", "5")...).CombinedOutput()
	if err == nil || !strings.Contains(strings.ToLower(string(out)), "authentication") {
		t.Errorf("kcat with a wrong password: %v\n%s", err, out)
	}
}
