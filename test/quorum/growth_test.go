package quorum

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestSingleNodeGrowsToThree: a node started without --voters (a
// controller quorum of itself) takes acks=all writes while two more nodes
// join as observers, become voters through `sluice quorum add-controller`
// (the quorum of one was formed at kraft.version 1, which voter changes
// need: KIP-853), the partitions move to RF 3, and the first node leaves
// the quorum and is killed. No record fails, every acknowledged one is
// read back from the two others, and the longest gap between
// acknowledgements during the growth is logged (and bounded).
func TestSingleNodeGrowsToThree(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	ports, err := testproc.FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	kafka := func(id int) int { return ports[3*(id-1)] }
	ctrl := func(id int) int { return ports[3*(id-1)+1] }
	httpP := func(id int) int { return ports[3*(id-1)+2] }
	cfg := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(cfg, []byte("auto.create.topics.enable=false\nbroker.session.timeout.ms=3000\nbroker.heartbeat.interval.ms=300\nreplica.lag.time.max.ms=5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n1 := testproc.Start(t, testproc.Options{NodeID: 1, ListenPort: kafka(1), ControllerPort: ctrl(1), HTTPPort: httpP(1),
		ExtraArgs: []string{"--config", cfg}})
	c := testcluster.Adopt(t, n1)
	if v := finalizedKRaftVersion(t, n1); v != 1 {
		t.Fatalf("a new single node's kraft.version is %d, want 1 (voter changes need it)", v)
	}

	const topic, parts = "grow", 3
	c.CreateTopic(topic, parts, 1, nil, nil)
	// The producer knows only node 1 at first: it learns the new
	// brokers from a metadata refresh (metadata.max.age.ms, 5 minutes by
	// default, shortened here), as a Kafka client bootstrapped with the
	// first node alone must before that node goes.
	load := c.StartLoad(topic, testcluster.LoadOptions{Partitions: []int32{0, 1, 2}, Rate: 300,
		ClientOpts: []kgo.Opt{kgo.MetadataMaxAge(time.Second)}})
	defer load.Abort()
	time.Sleep(2 * time.Second)
	growStart := time.Now()

	// Two more nodes, observers of node 1's quorum with a controller
	// listener each (prospective voters).
	voters := fmt.Sprintf("1@127.0.0.1:%d", ctrl(1))
	for id := 2; id <= 3; id++ {
		c.Add(testproc.Start(t, testproc.Options{NodeID: id, ListenPort: kafka(id), ControllerPort: ctrl(id), HTTPPort: httpP(id),
			ExtraArgs: []string{"--voters", voters, "--config", cfg}}))
	}
	c.WaitBrokers(3, time.Minute)
	cl := n1.Client(t)
	if _, v, o := describe(t, cl); !slices.Equal(v, []int32{1}) || !slices.Contains(o, 2) || !slices.Contains(o, 3) {
		t.Fatalf("before: voters %v observers %v, want voters [1], observers 2 and 3", v, o)
	}
	bin := testproc.Build(t)
	sluice := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		return string(out), err
	}
	for id := 2; id <= 3; id++ {
		args := []string{"quorum", "add-controller", "--bootstrap", n1.Addr(), "--id", strconv.Itoa(id), "--controller-address", fmt.Sprintf("127.0.0.1:%d", ctrl(id))}
		out, err := sluice(args...)
		if err != nil {
			t.Fatalf("sluice %v: %v\n%s", args, err, out)
		}
		t.Logf("sluice %v: %s", args, out)
	}
	waitVoters(t, cl, []int32{1, 2, 3})

	// RF 3.
	adm := kadm.NewClient(c.Client())
	var req kadm.AlterPartitionAssignmentsReq
	for p := range int32(parts) {
		req.Assign(topic, p, []int32{1 + p%3, 1 + (p+1)%3, 1 + (p+2)%3})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil || res.Error() != nil {
		t.Fatalf("reassign to RF 3: %v %v", err, res.Error())
	}
	testcluster.WaitFor(t, 2*time.Minute, "RF 3, full ISRs, no reassignment in progress", func() (bool, string) {
		m, err := c.Meta(topic)
		if err != nil {
			return false, err.Error()
		}
		lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
		if err != nil {
			return false, err.Error()
		}
		for p := range int32(parts) {
			if len(m[p].Replicas) != 3 || len(m[p].ISR) != 3 || m[p].Leader < 0 {
				return false, m[p].String()
			}
		}
		if n := len(lr[topic]); n > 0 {
			return false, fmt.Sprintf("%d reassignments in progress", n)
		}
		return true, ""
	})

	// Node 1 leaves the quorum (the active controller moves) and is
	// killed (SIGKILL).
	cl2 := c.Node(2).Client(t)
	// Refused while the new voters have not answered the active
	// controller's probe yet (the quorum would be lost): retried.
	testcluster.WaitFor(t, 30*time.Second, "node 1 removed from the quorum", func() (bool, string) {
		out, err := sluice("quorum", "remove-controller", "--bootstrap", c.Node(2).Addr(), "--id", "1")
		return err == nil, out
	})
	waitVoters(t, cl2, []int32{2, 3})
	time.Sleep(time.Second)
	killAt := time.Now()
	n1.Kill()
	testcluster.WaitFor(t, time.Minute, "leaders on nodes 2 and 3", func() (bool, string) {
		m, err := c.Meta(topic)
		if err != nil {
			return false, err.Error()
		}
		for p := range int32(parts) {
			if m[p].Leader != 2 && m[p].Leader != 3 {
				return false, m[p].String()
			}
		}
		return true, ""
	})
	time.Sleep(2 * time.Second)
	growEnd := time.Now()
	load.Stop(time.Minute)
	if n, v, err := load.Failures(); n > 0 {
		t.Fatalf("%d records failed, e.g. %s: %v", n, v, err)
	}
	// The longest gap between two acknowledgements of one partition:
	// while the quorum and the replicas grew and node 1 left the quorum
	// (no node down), and after node 1 was killed (its leaderships fail
	// over after broker.session.timeout.ms, its ISR places go after
	// replica.lag.time.max.ms).
	t.Logf("%s", load.Summary())
	var growGap, killGap time.Duration
	for p := range int32(parts) {
		g, _ := load.MaxGap(p, growStart, killAt)
		k, _ := load.MaxGap(p, killAt, growEnd)
		t.Logf("partition %d: longest gap between acks=all acknowledgements %v while growing, %v after node 1 was killed", p, g.Round(time.Millisecond), k.Round(time.Millisecond))
		growGap, killGap = max(growGap, g), max(killGap, k)
	}
	t.Logf("longest acks=all gap: %v while growing from 1 to 3 voters and RF 3 and removing node 1 from the quorum; %v after killing node 1",
		growGap.Round(time.Millisecond), killGap.Round(time.Millisecond))
	if growGap > 5*time.Second {
		t.Errorf("acks=all writes stopped for %v while the cluster grew", growGap)
	}
	if killGap > 20*time.Second {
		t.Errorf("acks=all writes stopped for %v after node 1 was killed", killGap)
	}

	// Everything acknowledged is read back from nodes 2 and 3.
	got := c.ConsumeAll(topic, parts, time.Minute)
	acked := load.Acked()
	for v, a := range acked {
		if g, ok := got[v]; !ok || g != a {
			t.Fatalf("%s acknowledged at %+v, read back at %+v (present %v)", v, a, g, ok)
		}
	}
	t.Logf("%d acknowledged records read back from nodes 2 and 3", len(acked))
}

// finalizedKRaftVersion is the node's finalized kraft.version
// (ApiVersions).
func finalizedKRaftVersion(t *testing.T, p *testproc.Proc) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, p.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "kraft.version" {
			return f.MaxVersionLevel
		}
	}
	return 0
}
