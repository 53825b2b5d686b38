// Package decommission retires a broker on real `sluice serve` processes
// with the built binary's admin commands: `sluice cluster decommission
// --broker 4 --wait` moves broker 4's replicas away under acks=all data,
// `sluice cluster unregister --broker 4` (UnregisterBroker, API 64)
// removes the stopped broker, and a new node 4 with an empty data
// directory registers again and hosts a new topic. The cluster is three
// voters and one broker-only node (4), as in test/reassign.
package decommission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// run runs the sluice binary (bounded by two minutes) and returns its
// standard output, standard error and exit status.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testproc.Build(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("sluice %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return out.String(), errb.String(), code
}

// brokersOf returns the broker ids that node lists in Metadata and in
// DescribeCluster.
func brokersOf(ctx context.Context, addr string) (meta, described []int32, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	// Requests to the seed itself, not to whichever broker kgo picks.
	br := cl.SeedBrokers()[0]
	mr, err := br.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, nil, err
	}
	for _, b := range mr.(*kmsg.MetadataResponse).Brokers {
		meta = append(meta, b.NodeID)
	}
	kr, err := br.Request(ctx, kmsg.NewPtrDescribeClusterRequest())
	if err != nil {
		return nil, nil, err
	}
	for _, b := range kr.(*kmsg.DescribeClusterResponse).Brokers {
		described = append(described, b.NodeID)
	}
	slices.Sort(meta)
	slices.Sort(described)
	return meta, described, nil
}

// waitBrokers waits until every node of nodes lists exactly want in both
// Metadata and DescribeCluster.
func waitBrokers(t *testing.T, nodes []*testproc.Proc, want []int32) {
	t.Helper()
	testcluster.WaitFor(t, 20*time.Second, fmt.Sprintf("brokers %v listed", want), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, p := range nodes {
			meta, desc, err := brokersOf(ctx, p.Addr())
			if err != nil {
				return false, err.Error()
			}
			if !slices.Equal(meta, want) || !slices.Equal(desc, want) {
				return false, fmt.Sprintf("node %d: Metadata %v, DescribeCluster %v", p.NodeID(), meta, desc)
			}
		}
		return true, ""
	})
}

func TestRetireBroker(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 4, Voters: 3, Props: map[string]string{
		"broker.session.timeout.ms":    "2000",
		"broker.heartbeat.interval.ms": "300",
		"auto.leader.rebalance.enable": "false",
	}})
	voters := c.Nodes()[:3]
	bootstrap := "--bootstrap=" + strings.Join(c.Addrs(false)[:3], ",")
	const topic = "retire"
	c.CreateTopic(topic, 1, -1, nil, [][]int32{{1, 4}})
	// Broker 4 leads a second partition: its leadership moves too.
	c.CreateTopic("led", 1, -1, nil, [][]int32{{4, 2}})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	acked := map[string]testcluster.Ack{}
	var recs []*kgo.Record
	for i := range 500 {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v%03d", i))})
	}
	for _, r := range cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			t.Fatalf("produce: %v", r.Err)
		}
		acked[string(r.Record.Value)] = testcluster.Ack{Partition: r.Record.Partition, Offset: r.Record.Offset}
	}

	// A running broker cannot be unregistered.
	if _, stderr, code := run(t, "cluster", "unregister", "--broker", "4", bootstrap); code != 1 || !strings.Contains(stderr, "is active") {
		t.Fatalf("unregister of a running broker: exit %d, %s", code, stderr)
	}

	stdout, _, code := run(t, "cluster", "decommission", "--broker", "4", "--wait", "--json", bootstrap)
	if code != 0 {
		t.Fatalf("decommission: exit %d", code)
	}
	var out struct {
		Plan struct {
			Partitions []struct {
				Topic     string  `json:"topic"`
				Partition int32   `json:"partition"`
				Replicas  []int32 `json:"replicas"`
			} `json:"partitions"`
		} `json:"plan"`
		Completed bool     `json:"completed"`
		NextSteps []string `json:"next_steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("decommission --json: %v", err)
	}
	if !out.Completed || len(out.Plan.Partitions) != 2 || !strings.Contains(strings.Join(out.NextSteps, "\n"), "sluice cluster unregister --broker 4") {
		t.Fatalf("decommission --json: %+v", out)
	}
	for _, tp := range []string{topic, "led"} {
		testcluster.WaitFor(t, 20*time.Second, tp+": replicas without 4, all in sync", func() (bool, string) {
			all, err := c.MetaAll(tp)
			if err != nil {
				return false, err.Error()
			}
			for id, m := range all {
				p := m[0]
				if len(p.Replicas) != 2 || slices.Contains(p.Replicas, 4) || len(p.ISR) != 2 || p.Leader == 4 {
					return false, fmt.Sprintf("node %d: %v", id, p)
				}
			}
			return true, ""
		})
	}
	// Broker 4 deleted its replica; every acknowledged record is readable.
	testcluster.WaitFor(t, 10*time.Second, "broker 4 deletes its replica", func() (bool, string) {
		_, err := os.Stat(filepath.Join(c.Node(4).DataDir(), topic+"-0"))
		return errors.Is(err, os.ErrNotExist), fmt.Sprint(err)
	})
	testcluster.CheckAcked(t, "after the decommission", acked, c.ConsumeAll(topic, 1, 20*time.Second))

	// Stop 4; it is still registered (DescribeCluster lists it, fenced)
	// until it is unregistered.
	c.Node(4).Stop()
	if _, desc, err := brokersOf(ctx, c.Node(1).Addr()); err != nil || !slices.Contains(desc, 4) {
		t.Fatalf("DescribeCluster before the unregister: %v %v", desc, err)
	}
	if _, stderr, code := run(t, "cluster", "unregister", "--broker", "4", bootstrap); code != 0 {
		t.Fatalf("unregister: exit %d: %s", code, stderr)
	}
	waitBrokers(t, voters, []int32{1, 2, 3})
	if _, stderr, code := run(t, "cluster", "unregister", "--broker", "4", bootstrap); code != 1 || !strings.Contains(stderr, "BROKER_ID_NOT_REGISTERED") {
		t.Fatalf("second unregister: exit %d: %s", code, stderr)
	}

	// A new broker 4, empty data directory, same ports and flags.
	old := c.Node(4)
	args := old.Args()
	extra := args[slices.Index(args, "--voters"):]
	fresh := testproc.Start(t, testproc.Options{Name: "node4-new", NodeID: 4, ListenPort: old.ListenPort(), HTTPPort: old.HTTPPort(), ExtraArgs: extra})
	waitBrokers(t, append(slices.Clone(voters), fresh), []int32{1, 2, 3, 4})
	c.CreateTopic("fresh", 1, -1, nil, [][]int32{{4, 3}})
	fc := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("fresh"))
	if err := fc.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce to the new broker 4: %v", err)
	}
	m, err := c.Meta("fresh")
	if err != nil || m[0].Leader != 4 || !slices.Equal(m[0].Replicas, []int32{4, 3}) {
		t.Fatalf("fresh: %v %v", m, err)
	}
}
