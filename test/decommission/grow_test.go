package decommission

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

// moveRate is broker 4's follower.replication.throttled.rate (bytes/s).
const moveRate = 1_000_000

// TestGrowAndRetireUnderLoad: under continuous acks=all load on a 3-node
// cluster (RF 3, min ISR 2), a fourth broker joins (started with a
// controller listener), half the partitions move onto it under a
// follower replication throttle, it becomes a controller voter, and then
// broker 1 is retired: its replicas moved away (`sluice cluster
// decommission`), its voter removed (`sluice quorum remove-controller`),
// the process stopped and its registration removed (`sluice cluster
// unregister`). At the end every acknowledged record is read back once at
// its offset, no partition went without acknowledgements for longer than
// an election, and the throttled move ran within 20% of the rate.
func TestGrowAndRetireUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{
		"broker.session.timeout.ms":    "2000",
		"broker.heartbeat.interval.ms": "300",
		"auto.leader.rebalance.enable": "false",
		"min.insync.replicas":          "2",
		"auto.create.topics.enable":    "false",
	}})
	args := c.Node(1).Args()
	cfgPath := args[slices.Index(args, "--config")+1]
	base, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg4 := filepath.Join(t.TempDir(), "node4.properties")
	if err := os.WriteFile(cfg4, append(base, fmt.Sprintf("follower.replication.throttled.rate=%d\n", moveRate)...), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := testproc.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	n4 := testproc.Start(t, testproc.Options{NodeID: 4, ListenPort: ports[0], ControllerPort: ports[1], HTTPPort: ports[2],
		ExtraArgs: []string{"--voters", args[slices.Index(args, "--voters")+1], "--config", cfg4}})
	c.WaitBrokers(4, time.Minute)
	bootstrap := "--bootstrap=" + strings.Join(c.Addrs(false)[1:3], ",")

	const topic, parts = "grow", 8
	var assign [][]int32
	for p := range parts {
		r := []int32{1, 2, 3}
		assign = append(assign, append(r[p%3:], r[:p%3]...))
	}
	c.CreateTopic(topic, parts, -1, map[string]string{"follower.replication.throttled.replicas": "*"}, assign)

	// ~2.5 MB of incompressible data in each partition that moves.
	moving := []int32{0, 1, 2, 3}
	pre := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	preAcked := map[string]testcluster.Ack{}
	for _, p := range moving {
		var recs []*kgo.Record
		for i := range 250 {
			v := make([]byte, 10000)
			rand.Read(v)
			copy(v, fmt.Sprintf("pre-%d-%04d-", p, i))
			recs = append(recs, &kgo.Record{Partition: p, Value: v})
		}
		for _, r := range pre.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				t.Fatalf("prefill: %v", r.Err)
			}
			preAcked[string(r.Record.Value)] = testcluster.Ack{Partition: r.Record.Partition, Offset: r.Record.Offset}
		}
	}
	pre.Close()

	var all []int32
	for p := range int32(parts) {
		all = append(all, p)
	}
	load := c.StartLoad(topic, testcluster.LoadOptions{Partitions: all, Rate: 200})
	loadStart := time.Now()
	time.Sleep(2 * time.Second)

	// Move half the partitions onto broker 4 (in place of broker 3).
	adm := kadm.NewClient(c.Node(2).Client(t))
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, p := range moving {
		r := slices.Clone(assign[p])
		r[slices.Index(r, 3)] = 4
		req.Assign(topic, p, r)
	}
	if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || res.Error() != nil {
		t.Fatalf("reassign: %v %v", err, res.Error())
	}
	type sample struct {
		at    time.Time
		bytes float64
	}
	var samples []sample
	testcluster.WaitForEvery(t, 200*time.Millisecond, 90*time.Second, "the move onto broker 4", func() (bool, string) {
		samples = append(samples, sample{time.Now(), throttledBytes(t, n4)})
		ls, err := adm.ListPartitionReassignments(ctx, nil)
		if err != nil {
			return false, err.Error()
		}
		m, err := c.Meta(topic)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range moving {
			if !slices.Contains(m[p].Replicas, 4) || len(m[p].Replicas) != 3 || len(m[p].ISR) != 3 {
				return false, fmt.Sprintf("p%d %v", p, m[p])
			}
		}
		return len(ls) == 0, fmt.Sprintf("%d reassignments in progress", len(ls))
	})
	// The rate after the first second, up to 90% of the bytes moved.
	total := samples[len(samples)-1].bytes
	var from, to *sample
	for i := range samples {
		s := &samples[i]
		if from == nil && s.bytes > 0 && s.at.After(samples[0].at.Add(time.Second)) {
			from = s
		}
		if from != nil && s.bytes <= 0.9*total {
			to = s
		}
	}
	if from == nil || to == nil || to.at.Sub(from.at) < 3*time.Second {
		t.Fatalf("move too short to measure: %v samples, %.0f bytes", len(samples), total)
	}
	got := (to.bytes - from.bytes) / to.at.Sub(from.at).Seconds()
	t.Logf("the move onto broker 4: %.0f throttled bytes, %.0f B/s from %.0f to %.0f bytes over %v (throttle %d B/s)",
		total, got, from.bytes, to.bytes, to.at.Sub(from.at).Round(time.Millisecond), moveRate)
	// The throttle is a ceiling: more than 20% above it is a failure.
	// Below it, the machine may be the limit: CI runs other packages'
	// clusters on the same two cores (0.47x to 0.74x there, 0.88x on an
	// idle machine), so a floor would time the machine, not the broker.
	// The move finishing inside the wait above is what shows it was not
	// starved; test/throttle checks the rate against the bound alone.
	t.Logf("the move ran at %.2fx the throttle", got/moveRate)
	if got > 1.2*moveRate {
		t.Errorf("the move ran at %.0f B/s, want at most %d + 20%%", got, moveRate)
	}

	// Broker 4 becomes a controller voter; then broker 1 retires.
	if out, _, code := run(t, "quorum", "add-controller", "--id", "4", "--controller-address", "127.0.0.1:"+strconv.Itoa(ports[1]), bootstrap); code != 0 {
		t.Fatalf("add-controller 4: exit %d %s", code, out)
	}
	retireAt := time.Now()
	if _, _, code := run(t, "cluster", "decommission", "--broker", "1", "--wait", bootstrap); code != 0 {
		t.Fatalf("decommission 1: exit %d", code)
	}
	if _, _, code := run(t, "quorum", "remove-controller", "--id", "1", bootstrap); code != 0 {
		t.Fatalf("remove-controller 1: exit %d", code)
	}
	c.Node(1).Stop()
	if _, stderr, code := run(t, "cluster", "unregister", "--broker", "1", bootstrap); code != 0 {
		t.Fatalf("unregister 1: exit %d %s", code, stderr)
	}
	waitBrokers(t, []*testproc.Proc{c.Node(2), c.Node(3), n4}, []int32{2, 3, 4})
	time.Sleep(3 * time.Second) // the load goes on without broker 1
	load.Stop(30 * time.Second)
	t.Log(load.Summary())

	if n, v, err := load.Failures(); n > 0 {
		t.Errorf("%d records failed, e.g. %s: %v", n, v, err)
	}
	// Availability: no partition without acknowledgements for longer
	// than an election (broker.session.timeout.ms 2 s plus the move of
	// its leadership).
	for p := range int32(parts) {
		if gap, at := load.MaxGap(p, loadStart, time.Time{}); gap > 5*time.Second {
			t.Errorf("partition %d had no acknowledgement for %v (until %v, %v after broker 1 began retiring)", p, gap.Round(time.Millisecond), at.Format("15:04:05.000"), at.Sub(retireAt).Round(time.Millisecond))
		}
	}
	gap, _ := load.MaxGap(-1, loadStart, time.Time{})
	t.Logf("longest gap between acknowledgements over all partitions: %v", gap.Round(time.Millisecond))
	acked := load.Acked()
	for v, a := range preAcked {
		acked[v] = a
	}
	read := c.ConsumeAll(topic, parts, time.Minute)
	testcluster.CheckAcked(t, "after growing and retiring", acked, read)
	m, err := c.Meta(topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		if slices.Contains(m[p].Replicas, 1) || len(m[p].ISR) != 3 {
			t.Errorf("p%d after the retirement: %v", p, m[p])
		}
	}
	t.Logf("%d acknowledged records read back at their offsets", len(acked))
}

// throttledBytes is node p's sluice_replication_throttled_bytes_total
// for the follower side.
func throttledBytes(t *testing.T, p *testproc.Proc) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr() + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, l := range strings.Split(sb.String(), "\n") {
		if strings.HasPrefix(l, `sluice_replication_throttled_bytes_total{side="follower"}`) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return 0
}
