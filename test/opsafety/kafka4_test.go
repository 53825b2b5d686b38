package opsafety

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/metaprops"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestKafka4BrokerOnlyFile is the second mistake: Kafka 4.x files for a
// combined node 1 (process.roles=broker,controller) and a broker-only
// node 2, both finding the quorum through controller.quorum.bootstrap.
// servers at node 1's CONTROLLER listener (KIP-853). Node 1, naming only
// itself, is a quorum of itself; node 2 follows that quorum as a broker
// and joins node 1's cluster (never a cluster of its own): node 1's
// Metadata lists both, and an RF 2 topic takes acks=all writes.
func TestKafka4BrokerOnlyFile(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	ports, err := testproc.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bootstrap := fmt.Sprintf("localhost:%d", ports[1])
	n1cfg := file("n1.properties", fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=%s
listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:%d
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%s
`, bootstrap, ports[0], ports[1], ports[0], filepath.Join(dir, "n1")))
	n2cfg := file("n2.properties", fmt.Sprintf(`process.roles=broker
node.id=2
controller.quorum.bootstrap.servers=%s
listeners=PLAINTEXT://127.0.0.1:%d
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:%d
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%s
`, bootstrap, ports[2], ports[2], filepath.Join(dir, "n2")))

	n1 := testproc.Start(t, testproc.Options{NodeID: 1, ListenPort: ports[0], HTTPPort: -1,
		DataDir: filepath.Join(dir, "n1"), ExtraArgs: []string{"--config", n1cfg}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n1.Client(t).Ping(ctx); err != nil {
		t.Fatal(err)
	}

	n2 := testproc.Start(t, testproc.Options{NodeID: 2, ListenPort: ports[2], HTTPPort: -1,
		DataDir: filepath.Join(dir, "n2"), ExtraArgs: []string{"--config", n2cfg}})
	// One cluster: node 1's Metadata lists both brokers under node 1's
	// cluster id, which node 2 recorded; an RF 2 topic takes acks=all
	// writes.
	cluster, _ := metadataOf(t, n1, 2)
	adm := kadm.NewClient(n1.Client(t))
	if p, _, err := metaprops.Read(n2.DataDir(), 2); err != nil || p.ClusterID != cluster {
		t.Errorf("node 2's meta.properties: %+v (%v), want cluster %s", p, err, cluster)
	}
	if _, err := adm.CreateTopic(ctx, 2, 2, nil, "both"); err != nil {
		t.Fatal("create an RF 2 topic:", err)
	}
	cl := n2.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("both"))
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal("produce at RF 2:", err)
		}
	}
}
