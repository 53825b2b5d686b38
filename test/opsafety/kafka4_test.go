package opsafety

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestKafka4BrokerOnlyFile is the second mistake: Kafka 4.x files for a
// combined node 1 (process.roles=broker,controller) and a broker-only
// node 2, both finding the quorum through controller.quorum.bootstrap.
// servers at node 1's CONTROLLER listener (KIP-853). sluice cannot form
// that dynamic quorum: node 2 must be refused with a message naming the
// key, never start a single-node cluster of its own. Node 1's file, the
// standalone combined form, serves as a single-node cluster.
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

	cmd := exec.CommandContext(ctx, testproc.Build(t), "serve", "--config", n2cfg)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("node 2 kept running: a second cluster:\n%s", tail(out))
	}
	if err == nil || !strings.Contains(string(out), "controller.quorum.bootstrap.servers="+bootstrap) {
		t.Fatalf("node 2: %v; want a refusal naming controller.quorum.bootstrap.servers:\n%s", err, tail(out))
	}
	if _, err := os.Stat(filepath.Join(dir, "n2", "meta.properties")); !os.IsNotExist(err) {
		t.Fatalf("the refused node 2 wrote its data directory: %v", err)
	}
}
