package security

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluice-io/sluice/internal/testcerts"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestClusterInterBrokerSASLSSL: three nodes whose inter-broker listener
// is SASL_SSL (PLAIN, client certificates required) replicate: a topic
// with min.insync.replicas=3 takes acks=all writes only if both followers
// fetch, which they can only do through TLS with their certificate and
// PLAIN with the broker's JAAS credentials.
func TestClusterInterBrokerSASLSSL(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-cluster")
	brokerCert := ca.Server("broker")
	alice := ca.Client("alice", pkix.Name{CommonName: "alice"})
	const n = 3
	ports, err := testproc.FreePorts(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	plainP := func(i int) int { return ports[4*i] }
	secureP := func(i int) int { return ports[4*i+1] }
	ctrlP := func(i int) int { return ports[4*i+2] }
	httpP := func(i int) int { return ports[4*i+3] }
	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrlP(i)))
	}
	var nodes []*testproc.Proc
	var seeds []string
	for i := range n {
		props := writeProps(t, map[string]string{
			"listeners":                                     "PLAINTEXT://" + addr(plainP(i)) + ",SASL_SSL://" + addr(secureP(i)),
			"inter.broker.listener.name":                    "SASL_SSL",
			"sasl.enabled.mechanisms":                       "PLAIN,SCRAM-SHA-256",
			"sasl.mechanism.inter.broker.protocol":          "PLAIN",
			"listener.name.sasl_ssl.plain.sasl.jaas.config": plainJAAS,
			"ssl.keystore.type":                             "PEM",
			"ssl.keystore.location":                         brokerCert.File,
			"ssl.truststore.type":                           "PEM",
			"ssl.truststore.location":                       ca.File,
			"ssl.client.auth":                               "required",
			"offsets.topic.replication.factor":              "3",
		})
		nodes = append(nodes, testproc.Start(t, testproc.Options{NodeID: i + 1, ListenPort: plainP(i), HTTPPort: httpP(i), ControllerPort: ctrlP(i),
			ExtraArgs: []string{"--voters", strings.Join(voters, ","), "--config", props}, NoWait: true}))
		seeds = append(seeds, addr(secureP(i)))
	}
	for _, p := range nodes {
		if err := p.WaitReady(testproc.DefaultStartTimeout); err != nil {
			t.Fatalf("node %d: %v", p.NodeID(), err)
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{alice.Cert}}),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}
	cl := client(t, opts...)
	adm := kadm.NewClient(cl)
	c := ctx(t, 90*time.Second)
	for {
		bs, err := adm.ListBrokers(c)
		if err == nil && len(bs) == n {
			for _, b := range bs {
				if b.Port != int32(secureP(int(b.NodeID)-1)) {
					t.Fatalf("broker %d listed at port %d on the SASL_SSL listener, want %d", b.NodeID, b.Port, secureP(int(b.NodeID)-1))
				}
			}
			break
		}
		if c.Err() != nil {
			t.Fatalf("brokers: %v %v", bs, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	three := "3"
	resp, err := adm.CreateTopics(c, 1, 3, map[string]*string{"min.insync.replicas": &three}, "replicated")
	if err != nil || resp["replicated"].Err != nil {
		t.Fatalf("create: %v %v", err, resp["replicated"].Err)
	}
	var values [][]byte
	for i := range 20 {
		values = append(values, []byte(fmt.Sprintf("record-%d", i)))
	}
	// produceConsume creates the topic only if missing.
	produceConsumeExisting(t, "replicated", values, client(t, append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(30*time.Second), kgo.DisableIdempotentWrite())...), opts...)
	// A SCRAM user created through one node is committed by the Raft
	// controller and authenticates on every node.
	res, err := adm.AlterUserSCRAMs(c, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Password: "carol-scram"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	for _, seed := range seeds {
		carol := append(opts[1:2:2], kgo.SeedBrokers(seed), kgo.SASL(scram256("carol", "carol-scram")), kgo.RequestRetries(0))
		var err error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			cl := client(t, carol...)
			_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx(t, 5*time.Second), cl)
			cl.Close()
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Errorf("SCRAM user on %s: %v", seed, err)
		}
	}
	total := 0.0
	for _, p := range nodes {
		total += metric(t, p, "sluice_successful_authentication_total")
	}
	if total < 2 {
		t.Errorf("%v successful authentications over the cluster, want at least the two followers'", total)
	}
}
