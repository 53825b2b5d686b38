package security

import (
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcerts"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestControllerPortMTLS: the CONTROLLER listener mapped to SSL with
// ssl.client.auth=required. Three voters and a broker-only node holding
// the cluster CA's certificates form the cluster and serve an RF 3 topic;
// a broker-only node whose certificate comes from another CA never
// registers; and on a voter's controller port a plain connection (raft or
// RPC), a TLS client without a certificate and one with a foreign
// certificate all get nothing: no raft traffic, no BrokerRegistration, no
// AlterPartition.
func TestControllerPortMTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-cluster")
	nodeCert := ca.Server("node")
	other := testcerts.NewCA(t, "another-ca")
	otherCert := other.Server("intruder")
	const voters, nodes = 3, 5
	ports, err := testproc.FreePorts(3 * nodes)
	if err != nil {
		t.Fatal(err)
	}
	kafkaP := func(i int) int { return ports[3*i] }
	ctrlP := func(i int) int { return ports[3*i+1] }
	httpP := func(i int) int { return ports[3*i+2] }
	var vs []string
	for i := range voters {
		vs = append(vs, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrlP(i)))
	}
	props := func(cert, trust string) string {
		return writeProps(t, map[string]string{
			"listener.security.protocol.map":             "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT",
			"listener.name.controller.ssl.keystore.type": "PEM", "listener.name.controller.ssl.keystore.location": cert,
			"listener.name.controller.ssl.truststore.type": "PEM", "listener.name.controller.ssl.truststore.location": trust,
			"listener.name.controller.ssl.client.auth": "required",
			"offsets.topic.replication.factor":         "3",
		})
	}
	good, bad := props(nodeCert.File, ca.File), props(otherCert.File, other.File)
	var procs []*testproc.Proc
	for i := range nodes {
		o := testproc.Options{NodeID: i + 1, ListenPort: kafkaP(i), HTTPPort: httpP(i),
			ExtraArgs: []string{"--voters", strings.Join(vs, ","), "--config", good}, NoWait: true}
		if i < voters {
			o.ControllerPort = ctrlP(i)
		}
		if i == nodes-1 {
			o.ExtraArgs[3] = bad // node 5: the wrong CA
		}
		procs = append(procs, testproc.Start(t, o))
	}
	for _, p := range procs {
		if err := p.WaitReady(testproc.DefaultStartTimeout); err != nil {
			t.Fatalf("node %d: %v", p.NodeID(), err)
		}
	}
	cl := client(t, kgo.SeedBrokers(procs[0].Addr()))
	adm := kadm.NewClient(cl)
	c := ctx(t, 90*time.Second)
	for {
		bs, err := adm.ListBrokers(c)
		if err == nil && len(bs) == nodes-1 {
			break
		}
		if c.Err() != nil {
			t.Fatalf("brokers: %v %v (want nodes 1-4)", bs, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	resp, err := adm.CreateTopics(c, 2, 3, nil, "over-mtls")
	if err != nil || resp["over-mtls"].Err != nil {
		t.Fatalf("create: %v %v", err, resp["over-mtls"].Err)
	}
	produceConsumeExisting(t, "over-mtls", [][]byte{[]byte("a"), []byte("b"), []byte("c")},
		client(t, kgo.SeedBrokers(procs[0].Addr()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(30*time.Second)),
		kgo.SeedBrokers(procs[0].Addr()))

	// Node 5 stays out: its TLS handshakes fail. Once it reports that it
	// cannot reach the quorum and voter 1 logged a failed handshake, the
	// broker list without it shows it was refused, not that it was slow.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		b, _ := os.ReadFile(procs[nodes-1].LogPath())
		if bytes.Contains(b, []byte("cannot reach the controller quorum")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 5 does not report that it cannot reach the quorum:\n%s", procs[nodes-1].LogTail(20))
		}
	}
	if b, _ := os.ReadFile(procs[0].LogPath()); !bytes.Contains(b, []byte("controller port: TLS handshake failed")) {
		t.Errorf("voter 1 logged no failed handshake")
	}
	if bs, err := adm.ListBrokers(c); err != nil || len(bs) != nodes-1 {
		t.Fatalf("brokers with the intruder running: %v %v", bs, err)
	}

	ctrl := addr(ctrlP(0))
	// frame is a controller RPC frame: a 4-byte length, then JSON.
	frame := func(op, body string) []byte {
		msg := fmt.Sprintf(`{"op":%q,"body":%s}`, op, body)
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)
	}
	for _, kind := range []struct {
		name string
		data []byte
	}{
		{"plain raft", []byte{'R', 0, 0, 0, 0}},
		{"plain BrokerRegistration", append([]byte{'C'}, frame("BrokerRegistration", `{"broker":{"id":9,"host":"127.0.0.1","port":1}}`)...)},
		{"plain AlterPartition", append([]byte{'C'}, frame("AlterPartition", `{}`)...)},
	} {
		conn, err := net.DialTimeout("tcp", ctrl, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(8 * time.Second))
		conn.Write(kind.data)
		got, _ := io.ReadAll(conn)
		conn.Close()
		// A TLS server answers a non-TLS first byte with at most an
		// alert record (content type 21), never a frame.
		if len(got) > 0 && got[0] != 21 {
			t.Errorf("%s: the controller port answered %q", kind.name, got)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"TLS without a certificate", &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}},
		{"TLS with another CA's certificate", &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{otherCert.Cert}}},
		{"TLS with a client certificate of another CA", &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1",
			Certificates: []tls.Certificate{other.Client("mallory", pkix.Name{CommonName: "mallory"}).Cert}}},
	} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", ctrl, tc.cfg)
		if err == nil {
			// TLS 1.3: the client's handshake ends before the server
			// checks the certificate; the refusal comes on first read.
			conn.SetDeadline(time.Now().Add(8 * time.Second))
			conn.Write([]byte{'C'})
			conn.Write(frame("BrokerRegistration", `{}`))
			var b [1]byte
			_, err = conn.Read(b[:])
			conn.Close()
		}
		if err == nil {
			t.Errorf("%s: the controller port answered", tc.name)
		}
	}
}
