package security

import (
	"context"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kgoscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/sluice-io/sluice/internal/testcerts"
	"github.com/sluice-io/sluice/internal/testproc"
)

// secureCluster is a 3-node cluster with, on every node, a SASL_SSL
// listener (SCRAM-SHA-512, no client certificate asked) that is also the
// inter-broker listener, an SSL listener with ssl.client.auth=required,
// and the controller port over mTLS (CONTROLLER:SSL).
type secureCluster struct {
	ca         *testcerts.CA
	caFile     string
	alice      *testcerts.Issued // client certificate, CN=alice
	certFile   string            // alice's chain alone (PEM)
	keyFile    string            // alice's key alone (PEM)
	saslSeeds  []string
	sslSeeds   []string
	nodes      []*testproc.Proc
	adminOpts  []kgo.Opt // franz-go as alice over SASL_SSL
	user, pass string
}

func startSecureCluster(t *testing.T) *secureCluster {
	t.Helper()
	ca := testcerts.NewCA(t, "sluice-clients")
	brokerCert := ca.Server("broker")
	sc := &secureCluster{ca: ca, caFile: ca.File, alice: ca.Client("alice", pkix.Name{CommonName: "alice"}),
		user: "alice", pass: "alice-scram-secret"}
	dir := t.TempDir()
	sc.certFile, sc.keyFile = filepath.Join(dir, "alice.crt"), filepath.Join(dir, "alice.key")
	if err := os.WriteFile(sc.certFile, sc.alice.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sc.keyFile, sc.alice.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 3
	ports, err := testproc.FreePorts(5 * n)
	if err != nil {
		t.Fatal(err)
	}
	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[5*i+3]))
	}
	for i := range n {
		plainP, saslP, sslP, ctrlP, httpP := ports[5*i], ports[5*i+1], ports[5*i+2], ports[5*i+3], ports[5*i+4]
		props := writeProps(t, map[string]string{
			"listeners":                                             "PLAINTEXT://" + addr(plainP) + ",SASL_SSL://" + addr(saslP) + ",SSL://" + addr(sslP),
			"inter.broker.listener.name":                            "SASL_SSL",
			"sasl.enabled.mechanisms":                               "SCRAM-SHA-512",
			"sasl.mechanism.inter.broker.protocol":                  "SCRAM-SHA-512",
			"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
			"sluice.scram.bootstrap.credentials":                    `SCRAM-SHA-512=[name=broker,password=broker-secret];SCRAM-SHA-512=[name=alice,password=alice-scram-secret]`,
			"ssl.keystore.type":                                     "PEM",
			"ssl.keystore.location":                                 brokerCert.File,
			"ssl.truststore.type":                                   "PEM",
			"ssl.truststore.location":                               ca.File,
			"listener.name.ssl.ssl.client.auth":                     "required",
			"listener.name.sasl_ssl.ssl.client.auth":                "none",
			"listener.security.protocol.map":                        "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
			"listener.name.controller.ssl.client.auth":              "required",
			"offsets.topic.replication.factor":                      "3",
		})
		sc.nodes = append(sc.nodes, testproc.Start(t, testproc.Options{NodeID: i + 1, ListenPort: plainP, HTTPPort: httpP, ControllerPort: ctrlP,
			ExtraArgs: []string{"--voters", strings.Join(voters, ","), "--config", props}, NoWait: true}))
		sc.saslSeeds = append(sc.saslSeeds, addr(saslP))
		sc.sslSeeds = append(sc.sslSeeds, addr(sslP))
	}
	for _, p := range sc.nodes {
		if err := p.WaitReady(testproc.DefaultStartTimeout); err != nil {
			t.Fatalf("node %d: %v", p.NodeID(), err)
		}
	}
	sc.adminOpts = []kgo.Opt{kgo.SeedBrokers(sc.saslSeeds...), kgo.DialTLSConfig(sc.tlsConfig(false)), kgo.SASL(scram512(sc.user, sc.pass))}
	// The bootstrap credentials exist once the nodes have caught up with
	// the metadata; the cluster is whole when all three are listed.
	c := ctx(t, 60*time.Second)
	for {
		cl, err := kgo.NewClient(append(sc.adminOpts, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := kadm.NewClient(cl).ListBrokers(c)
		cl.Close()
		if err == nil && len(bs) == n {
			break
		}
		if c.Err() != nil {
			t.Fatalf("cluster over SASL_SSL as alice: %v %v", bs, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return sc
}

// tlsConfig trusts the test CA and, with cert, presents alice's
// certificate.
func (sc *secureCluster) tlsConfig(cert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: sc.ca.Pool, MinVersion: tls.VersionTLS12}
	if cert {
		cfg.Certificates = []tls.Certificate{sc.alice.Cert}
	}
	return cfg
}

// createTopics creates RF 3, single-partition topics with
// min.insync.replicas=3, so an acks=all write is on all three nodes.
func (sc *secureCluster) createTopics(t *testing.T, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(client(t, sc.adminOpts...))
	c := ctx(t, 30*time.Second)
	three := "3"
	resp, err := adm.CreateTopics(c, 1, 3, map[string]*string{"min.insync.replicas": &three}, topics...)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	for _, r := range resp {
		if r.Err != nil {
			t.Fatalf("create %s: %v %s", r.Topic, r.Err, r.ErrMessage)
		}
	}
	for {
		md, err := adm.Metadata(c, topics...)
		ready := err == nil
		for _, topic := range topics {
			td, ok := md.Topics[topic]
			ready = ready && ok && td.Err == nil && len(td.Partitions) == 1 && td.Partitions[0].Leader >= 0 && len(td.Partitions[0].ISR) == 3
		}
		if ready {
			return
		}
		if c.Err() != nil {
			t.Fatalf("topics not ready: %v %v", md.Topics, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endOffset is the high watermark of topic's partition 0.
func (sc *secureCluster) endOffset(t *testing.T, topic string) int64 {
	t.Helper()
	lo, err := kadm.NewClient(client(t, sc.adminOpts...)).ListEndOffsets(ctx(t, 15*time.Second), topic)
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	o, ok := lo.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("ListEndOffsets %s: %v %v", topic, ok, o.Err)
	}
	return o.Offset
}

// clientMode is one way a client reaches the cluster.
type clientMode struct {
	name  string // "sasl_ssl" or "mtls"
	seeds []string
}

func (m clientMode) sasl() bool { return m.name == "sasl_ssl" }

const clientRecords = 50

func clientValues(prefix string) []string {
	vs := make([]string, clientRecords)
	for i := range vs {
		vs[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return vs
}

func checkValues(t *testing.T, who string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s consumed %d records, want %d: %q", who, len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s record %d = %q, want %q", who, i, got[i], want[i])
		}
	}
}

// TestClientsSASLSSLAndMTLS: franz-go, sarama, kafka-go, kcat
// (librdkafka) and KafkaJS each produce records with acks=all to an RF 3
// topic (min.insync.replicas=3) of a three-node cluster and read them back,
// once over SASL_SSL with SCRAM-SHA-512 (user created by
// sluice.scram.bootstrap.credentials) and once over SSL with a client
// certificate of the test CA (ssl.client.auth=required). Followers
// replicate over SASL_SSL with SCRAM-SHA-512. Each client is also denied
// with a wrong password (an authentication error, nothing produced); the
// mTLS listener refuses a client without a certificate (franz-go, kcat).
// kcat and KafkaJS are skipped when missing, except under CI.
func TestClientsSASLSSLAndMTLS(t *testing.T) {
	sc := startSecureCluster(t)
	modes := []clientMode{{"sasl_ssl", sc.saslSeeds}, {"mtls", sc.sslSeeds}}
	clients := []struct {
		name string
		run  func(t *testing.T, sc *secureCluster, m clientMode, topic string)
	}{
		{"franz-go", runFranzClient},
		{"sarama", runSaramaClient},
		{"kafka-go", runKafkaGoClient},
		{"kcat", runKcatClient},
		{"kafkajs", runKafkaJSClient},
	}
	var topics []string
	for _, cl := range clients {
		for _, m := range modes {
			topics = append(topics, cl.name+"-"+m.name)
		}
	}
	sc.createTopics(t, topics...)
	for _, cl := range clients {
		for _, m := range modes {
			topic := cl.name + "-" + m.name
			t.Run(topic, func(t *testing.T) {
				cl.run(t, sc, m, topic)
				// The denial (run first) left nothing behind.
				if end := sc.endOffset(t, topic); end != clientRecords {
					t.Errorf("%s: high watermark %d, want %d", topic, end, clientRecords)
				}
			})
		}
	}
}

// --- franz-go

func runFranzClient(t *testing.T, sc *secureCluster, m clientMode, topic string) {
	base := []kgo.Opt{kgo.SeedBrokers(m.seeds...)}
	if m.sasl() {
		base = append(base, kgo.DialTLSConfig(sc.tlsConfig(false)))
		// A produce would retry the authentication until its delivery
		// timeout; one request shows the broker's answer.
		denied := client(t, append(base, kgo.SASL(scram512(sc.user, "wrong")), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx(t, 10*time.Second), denied)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("franz-go, wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
		denied.Close()
		base = append(base, kgo.SASL(scram512(sc.user, sc.pass)))
	} else {
		noCert := client(t, append(base, kgo.DialTLSConfig(sc.tlsConfig(false)), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx(t, 10*time.Second), noCert); err == nil {
			t.Errorf("franz-go without a client certificate: Metadata answered on the mTLS listener")
		}
		noCert.Close()
		base = append(base, kgo.DialTLSConfig(sc.tlsConfig(true)))
	}
	var values [][]byte
	for _, v := range clientValues(topic) {
		values = append(values, []byte(v))
	}
	pc := client(t, append(base, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(30*time.Second))...)
	produceConsumeExisting(t, topic, values, pc, base...)
}

// --- sarama

// saramaSCRAM is sarama's SCRAMClient over github.com/xdg-go/scram (sarama
// leaves the SCRAM implementation to the application).
type saramaSCRAM struct {
	conv *scram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, pass, authzID string) error {
	c, err := scram.HashGeneratorFcn(sha512.New).NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaSCRAM) Done() bool                            { return s.conv.Done() }

func saramaClientConfig(sc *secureCluster, m clientMode, pass string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "sluice-security-sarama"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 15 * time.Second
	cfg.Net.WriteTimeout = 15 * time.Second
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = sc.tlsConfig(!m.sasl())
	if m.sasl() {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.User, cfg.Net.SASL.Password = sc.user, pass
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	}
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Timeout = 10 * time.Second
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 50 * time.Millisecond
	return cfg
}

func runSaramaClient(t *testing.T, sc *secureCluster, m clientMode, topic string) {
	if m.sasl() {
		cfg := saramaClientConfig(sc, m, "wrong")
		cfg.Metadata.Retry.Max = 0
		p, err := sarama.NewSyncProducer(m.seeds, cfg)
		if err == nil {
			_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("denied")})
			p.Close()
		}
		if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
			t.Errorf("sarama, wrong password: %v, want %v", err, sarama.ErrSASLAuthenticationFailed)
		}
	}
	cfg := saramaClientConfig(sc, m, sc.pass)
	p, err := sarama.NewSyncProducer(m.seeds, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	want := clientValues(topic)
	var msgs []*sarama.ProducerMessage
	for _, v := range want {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)})
	}
	if err := p.SendMessages(msgs); err != nil {
		p.Close()
		t.Fatalf("sarama SendMessages: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("sarama producer Close: %v", err)
	}
	c, err := sarama.NewConsumer(m.seeds, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumer: %v", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama ConsumePartition: %v", err)
	}
	defer pc.Close()
	c30 := ctx(t, 30*time.Second)
	var got []string
	for len(got) < len(want) {
		select {
		case msg := <-pc.Messages():
			got = append(got, string(msg.Value))
		case err := <-pc.Errors():
			t.Fatalf("sarama partition consumer: %v", err)
		case <-c30.Done():
			t.Fatalf("sarama consumer: %d of %d records before the deadline", len(got), len(want))
		}
	}
	checkValues(t, "sarama", got, want)
}

// --- kafka-go

func runKafkaGoClient(t *testing.T, sc *secureCluster, m clientMode, topic string) {
	mech := func(pass string) *kafka.Transport {
		tr := &kafka.Transport{DialTimeout: 5 * time.Second, ClientID: "sluice-security-kafkago", TLS: sc.tlsConfig(!m.sasl())}
		if m.sasl() {
			mc, err := kgoscram.Mechanism(kgoscram.SHA512, sc.user, pass)
			if err != nil {
				t.Fatal(err)
			}
			tr.SASL = mc
		}
		return tr
	}
	writer := func(tr *kafka.Transport, attempts int) *kafka.Writer {
		return &kafka.Writer{Addr: kafka.TCP(m.seeds...), Transport: tr, Topic: topic, RequiredAcks: kafka.RequireAll,
			BatchSize: clientRecords, BatchTimeout: 5 * time.Millisecond, WriteTimeout: 15 * time.Second, ReadTimeout: 15 * time.Second,
			MaxAttempts: attempts}
	}
	if m.sasl() {
		tr := mech("wrong")
		w := writer(tr, 1)
		err := w.WriteMessages(ctx(t, 15*time.Second), kafka.Message{Value: []byte("denied")})
		w.Close()
		tr.CloseIdleConnections()
		if !errors.Is(err, kafka.SASLAuthenticationFailed) {
			t.Errorf("kafka-go, wrong password: %v, want %v", err, kafka.SASLAuthenticationFailed)
		}
	}
	tr := mech(sc.pass)
	defer tr.CloseIdleConnections()
	w := writer(tr, 3)
	want := clientValues(topic)
	var msgs []kafka.Message
	for _, v := range want {
		msgs = append(msgs, kafka.Message{Value: []byte(v)})
	}
	if err := w.WriteMessages(ctx(t, 30*time.Second), msgs...); err != nil {
		w.Close()
		t.Fatalf("kafka-go WriteMessages: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("kafka-go Writer.Close: %v", err)
	}
	dialer := &kafka.Dialer{Timeout: 5 * time.Second, ClientID: "sluice-security-kafkago", TLS: tr.TLS, SASLMechanism: tr.SASL}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: m.seeds, Topic: topic, Partition: 0, Dialer: dialer,
		MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 200 * time.Millisecond})
	defer r.Close()
	c30 := ctx(t, 30*time.Second)
	var got []string
	for len(got) < len(want) {
		msg, err := r.ReadMessage(c30)
		if err != nil {
			t.Fatalf("kafka-go ReadMessage after %d records: %v", len(got), err)
		}
		got = append(got, string(msg.Value))
	}
	checkValues(t, "kafka-go", got, want)
}

// --- kcat (librdkafka)

func runKcatClient(t *testing.T, sc *secureCluster, m clientMode, topic string) {
	kcat := testproc.RequireTool(t, "kcat")
	args := func(pass string, extra ...string) []string {
		a := []string{"-b", strings.Join(m.seeds, ","), "-t", topic, "-X", "ssl.ca.location=" + sc.caFile,
			"-X", "socket.timeout.ms=10000", "-X", "topic.metadata.refresh.interval.ms=1000"}
		if m.sasl() {
			a = append(a, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
				"-X", "sasl.username="+sc.user, "-X", "sasl.password="+pass)
		} else {
			a = append(a, "-X", "security.protocol=SSL", "-X", "ssl.certificate.location="+sc.certFile, "-X", "ssl.key.location="+sc.keyFile)
		}
		return append(a, extra...)
	}
	runKcat := func(stdin string, a []string) (string, error) {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(c, kcat, a...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if m.sasl() {
		out, err := runKcat("denied\n", args("wrong", "-P", "-X", "acks=all", "-X", "message.timeout.ms=5000"))
		if err == nil || !strings.Contains(strings.ToLower(out), "authentication") {
			t.Errorf("kcat, wrong password: %v, want an authentication error:\n%s", err, out)
		}
	} else {
		// No client certificate: the handshake fails.
		a := args("")
		var noCert []string
		for i := 0; i < len(a); i++ {
			if a[i] == "-X" && (strings.HasPrefix(a[i+1], "ssl.certificate.location=") || strings.HasPrefix(a[i+1], "ssl.key.location=")) {
				i++
				continue
			}
			noCert = append(noCert, a[i])
		}
		if out, err := runKcat("", append(noCert, "-L", "-m", "3")); err == nil || !strings.Contains(strings.ToLower(out), "ssl") {
			t.Errorf("kcat without a client certificate: %v, want an SSL handshake failure:\n%s", err, out)
		}
	}
	want := clientValues(topic)
	if out, err := runKcat(strings.Join(want, "\n")+"\n", args(sc.pass, "-P", "-X", "acks=all", "-X", "message.timeout.ms=20000")); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	c := ctx(t, 30*time.Second)
	cmd := exec.CommandContext(c, kcat, args(sc.pass, "-C", "-e", "-q", "-o", "beginning", "-f", `%s\n`)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat consume: %v\n%s", err, stderr.String())
	}
	checkValues(t, "kcat", strings.Fields(string(out)), want)
}

// --- KafkaJS

func runKafkaJSClient(t *testing.T, sc *secureCluster, m clientMode, topic string) {
	node := testproc.RequireTool(t, "node")
	modules, err := filepath.Abs(filepath.Join("..", "compat", "kafkajs", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); err != nil {
		msg := "test/compat/kafkajs/node_modules missing: run scripts/install-test-deps.sh (npm ci)"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (CI=%q)", msg, os.Getenv("CI"))
		}
		t.Skip(msg + "; skipped outside CI")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "kafkajs-secure.js"))
	if err != nil {
		t.Fatal(err)
	}
	args := func(pass string, extra ...string) []string {
		a := []string{script, "--broker", m.seeds[0], "--topic", topic, "--count", fmt.Sprint(clientRecords),
			"--prefix", topic, "--ca", sc.caFile}
		if m.sasl() {
			a = append(a, "--user", sc.user, "--password", pass)
		} else {
			a = append(a, "--cert", sc.certFile, "--key", sc.keyFile)
		}
		return append(a, extra...)
	}
	runNode := func(a []string) string {
		t.Helper()
		c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(c, node, a...)
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), `"ok":true`) {
			t.Fatalf("node %s: %v\n%s%s", strings.Join(a[1:], " "), err, out, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	if m.sasl() {
		t.Logf("kafkajs, wrong password: %s", runNode(args("wrong", "--expect-auth-failure")))
	}
	// The script checks the values it reads back.
	t.Logf("kafkajs: %s", runNode(args(sc.pass)))
}
