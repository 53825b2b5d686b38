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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/metaprops"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestStorageFormat forms clusters the Kafka 4 way: `sluice storage
// random-uuid`, `sluice storage format --cluster-id ID --standalone
// --config FILE` of a combined node's Kafka 4.x file, then `sluice serve
// --config FILE`; and three combined nodes formatted with
// --initial-controllers (each voter's directory id given) and started
// without --voters. Each serves the formatted cluster id as one cluster
// (all brokers in Metadata, acks=all writes at RF 1 and RF 3, kcat
// writing through one node and reading through another); a second
// format of a formatted directory is refused and changes nothing.
func TestStorageFormat(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	bin := testproc.Build(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ports, err := testproc.FreePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// A Kafka 4.x combined node's file, as config/server.properties has
	// it (with this test's ports and directory).
	kafka4 := func(id int, kafka, ctrl int, bootstrap string) (cfg, data string) {
		data = filepath.Join(dir, fmt.Sprintf("n%d", id))
		cfg = filepath.Join(dir, fmt.Sprintf("n%d.properties", id))
		text := fmt.Sprintf(`process.roles=broker,controller
node.id=%d
controller.quorum.bootstrap.servers=%s
listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%s
`, id, bootstrap, kafka, ctrl, kafka, ctrl, data)
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return cfg, data
	}
	clusterOf := func(p *testproc.Proc, brokers int) string {
		t.Helper()
		id, _ := metadataOf(t, p, brokers)
		return id
	}
	produce := func(p *testproc.Proc, topic string, rf int16) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		adm := kadm.NewClient(p.Client(t))
		if _, err := adm.CreateTopic(ctx, 1, rf, nil, topic); err != nil {
			t.Fatalf("create %s (RF %d): %v", topic, rf, err)
		}
		cl := p.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}

	// --standalone.
	id := run("storage", "random-uuid")
	if err := metaprops.CheckUUID(id); err != nil {
		t.Fatalf("random-uuid: %v", err)
	}
	cfg, data := kafka4(1, ports[0], ports[1], fmt.Sprintf("127.0.0.1:%d", ports[1]))
	t.Log(run("storage", "format", "--cluster-id", id, "--standalone", "--config", cfg))
	before := tree(t, data)
	if out, err := exec.Command(bin, "storage", "format", "--cluster-id", metaprops.RandomUUID(), "--standalone", "--config", cfg).CombinedOutput(); err == nil || !strings.Contains(string(out), "already formatted") {
		t.Errorf("a second format: %v, want a refusal:\n%s", err, out)
	}
	if after := tree(t, data); after != before {
		t.Errorf("the refused format changed the directory:\n%s\nwas\n%s", after, before)
	}
	n1 := testproc.Start(t, testproc.Options{NodeID: 1, ListenPort: ports[0], HTTPPort: -1, DataDir: data, ExtraArgs: []string{"--config", cfg}})
	if got := clusterOf(n1, 1); got != id {
		t.Errorf("the standalone node serves cluster %q, formatted %q", got, id)
	}
	produce(n1, "solo", 1)
	n1.Stop()

	// --initial-controllers: three combined nodes.
	id = run("storage", "random-uuid")
	var voters, bootstrap []string
	dirIDs := map[int]string{}
	for i := 1; i <= 3; i++ {
		dirIDs[i] = run("storage", "random-uuid")
		ctrl := ports[2*i+1]
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d:%s", i, ctrl, dirIDs[i]))
		bootstrap = append(bootstrap, fmt.Sprintf("127.0.0.1:%d", ctrl))
	}
	var nodes []*testproc.Proc
	for i := 1; i <= 3; i++ {
		cfg, data := kafka4(i+1, ports[2*i], ports[2*i+1], strings.Join(bootstrap, ","))
		// Node ids 1..3 on the files of n2..n4 (n1 was the standalone).
		text, _ := os.ReadFile(cfg)
		os.WriteFile(cfg, []byte(strings.Replace(string(text), fmt.Sprintf("node.id=%d", i+1), fmt.Sprintf("node.id=%d", i), 1)), 0o644)
		t.Log(run("storage", "format", "--cluster-id", id, "--initial-controllers", strings.Join(voters, ","), "--config", cfg))
		p, found, err := metaprops.Read(data, int32(i))
		if err != nil || !found || p.ClusterID != id || p.DirectoryID != dirIDs[i] {
			t.Fatalf("node %d's meta.properties: %+v (found %v, %v), want cluster %s directory %s", i, p, found, err, id, dirIDs[i])
		}
		nodes = append(nodes, testproc.Start(t, testproc.Options{NodeID: i, ListenPort: ports[2*i], HTTPPort: -1, DataDir: data,
			ExtraArgs: []string{"--config", cfg}, NoWait: true}))
	}
	for _, p := range nodes {
		if err := p.WaitReady(time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range nodes {
		if got := clusterOf(p, 3); got != id {
			t.Errorf("node %d serves cluster %q, formatted %q", p.NodeID(), got, id)
		}
	}
	produce(nodes[0], "trio", 3)

	// kcat (librdkafka) writes through one node and reads everything
	// back through another.
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat is not installed (scripts/install-test-deps.sh installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"-X", "socket.timeout.ms=10000", "-X", "message.timeout.ms=30000", "-t", "trio"}
	pc := exec.CommandContext(ctx, kcat, append([]string{"-b", nodes[1].Addr(), "-P", "-X", "acks=all"}, base...)...)
	pc.Stdin = strings.NewReader("from-kcat\n")
	if out, err := pc.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, kcat, append([]string{"-b", nodes[2].Addr(), "-C", "-o", "beginning", "-e", "-q"}, base...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 2 || got[0] != "v" || got[1] != "from-kcat" {
		t.Fatalf("kcat read %q from the formatted cluster, want [v from-kcat]", got)
	}
}

// metadataOf waits until p's Metadata lists n brokers and returns its
// cluster id and the broker ids, asking p itself each time with a new
// client (no cached metadata).
func metadataOf(t *testing.T, p *testproc.Proc, n int) (string, []int32) {
	t.Helper()
	var id string
	var ids []int32
	testcluster.WaitFor(t, time.Minute, fmt.Sprintf("node %d's Metadata lists %d brokers", p.NodeID(), n), func() (bool, string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.RequestRetries(0))
		if err != nil {
			return false, err.Error()
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			return false, err.Error()
		}
		ids = ids[:0]
		for _, b := range resp.Brokers {
			ids = append(ids, b.NodeID)
		}
		if resp.ClusterID != nil {
			id = *resp.ClusterID
		}
		return len(ids) == n, fmt.Sprintf("brokers %v", ids)
	})
	return id, ids
}
