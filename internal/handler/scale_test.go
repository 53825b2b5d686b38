package handler_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/controller"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/vfs"
)

// raftNode is a single-node cluster on the Raft controller (a quorum of
// one voter), its partitions on the in-memory filesystem, serving Kafka on
// a loopback port.
type raftNode struct {
	*node
	ctrl *controller.Node
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startRaftNode(t *testing.T, props map[string]string) *raftNode {
	t.Helper()
	lns := make([]net.Listener, 2)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	ctrlAddr := lns[1].Addr().String()
	lns[1].Close()
	cfg := config.Defaults()
	cfg.DataDir = "/data"
	cfg.Listen = lns[0].Addr().String()
	cfg.Voters = []config.Voter{{ID: 1, Addr: ctrlAddr}}
	for k, v := range props {
		cfg.Props[k] = v
	}
	self, err := broker.SelfBroker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cn, err := controller.Start(controller.Config{NodeID: 1, Voters: cfg.Voters, ControllerListen: ctrlAddr,
		DataDir: t.TempDir(), Self: self, Broker: cfg, RaftTimeout: 400 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cn.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(broker.Options{Config: cfg, FS: vfs.NewMem(), Controller: cn, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	reg := protocol.NewRegistry()
	hs := handler.Register(reg, b)
	srv := protocol.NewServer(protocol.Config{}, reg)
	go srv.Serve(lns[0])
	n := &raftNode{node: &node{t: t, addr: cfg.Listen, b: b, h: hs, srv: srv}, ctrl: cn}
	t.Cleanup(func() {
		n.stop()
		cn.Close()
	})
	return n
}

// produceFetch produces one record to topic/0 and reads it back.
func produceFetch(t *testing.T, cl *kgo.Client, topic, value string) time.Duration {
	t.Helper()
	t0 := time.Now()
	r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(value)}
	if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	ad := kadm.NewClient(cl)
	offs, err := ad.ListEndOffsets(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); !ok || o.Offset != r.Offset+1 {
		t.Fatalf("end offset of %s/0: %+v after producing at %d", topic, o, r.Offset)
	}
	return time.Since(t0)
}

// A topic of 10,000 partitions, over real TCP, on a Raft controller: it is
// created in one bounded raft entry and served.
func TestCreateTenThousandPartitions(t *testing.T) {
	n := startRaftNode(t, nil)
	cl := n.client(kgo.DefaultProduceTopic("big"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ad := kadm.NewClient(cl)
	s0 := n.ctrl.Stats()
	t0 := time.Now()
	res, err := ad.CreateTopic(ctx(t), 10000, 1, nil, "big")
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	took := time.Since(t0)
	s1 := n.ctrl.Stats()
	t.Logf("10,000 partitions created in %v: %d raft entries, %d records, largest entry %d bytes",
		took, s1.Entries-s0.Entries, s1.Records-s0.Records, s1.MaxEntryBytes)
	// The topic is one entry of ten records; the broker's first
	// AlterPartition or producer-id block may add one more.
	if e := s1.Entries - s0.Entries; e > 2 {
		t.Fatalf("creating 10,000 partitions took %d raft entries; want at most 2", e)
	}
	if r := s1.Records - s0.Records; r > 11 {
		t.Fatalf("creating 10,000 partitions took %d records; want at most 11", r)
	}
	if len(n.b.Partitions()) != 10000 {
		t.Fatalf("%d local partitions", len(n.b.Partitions()))
	}
	td, err := ad.ListTopics(ctx(t), "big")
	if err != nil || len(td["big"].Partitions) != 10000 {
		t.Fatalf("metadata: %v, %d partitions", err, len(td["big"].Partitions))
	}
	produceFetch(t, cl, "big", "v")
}

// A million partitions are refused at once with Kafka's POLICY_VIOLATION
// (ReplicationControlManager.validateTotalNumberOfPartitions), nothing is
// written, and the node keeps serving.
func TestCreateMillionPartitionsRefused(t *testing.T) {
	n := startRaftNode(t, nil)
	cl := n.client()
	ad := kadm.NewClient(cl)
	if _, err := ad.CreateTopic(ctx(t), 1, 1, nil, "live"); err != nil {
		t.Fatal(err)
	}
	s0 := n.ctrl.Stats()
	t0 := time.Now()
	rs, err := ad.CreateTopics(ctx(t), 1000000, 3, nil, "huge")
	took := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	res := rs["huge"]
	if !errors.Is(res.Err, kerr.PolicyViolation) || !strings.Contains(res.ErrMessage, "Excessively large number of partitions per request") {
		t.Fatalf("a million partitions: %v %q; want POLICY_VIOLATION", res.Err, res.ErrMessage)
	}
	if took > time.Second {
		t.Fatalf("the refusal took %v", took)
	}
	// Over several topics of one request: the whole request is refused.
	rs, err = ad.CreateTopics(ctx(t), 6000, 1, nil, "half1", "half2")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if !errors.Is(r.Err, kerr.PolicyViolation) {
			t.Fatalf("%s of a 12,000-partition request: %v", r.Topic, r.Err)
		}
	}
	if d := n.ctrl.Stats().Entries - s0.Entries; d != 0 {
		t.Fatalf("%d raft entries written by refused requests", d)
	}
	td, err := ad.ListTopics(ctx(t))
	if err != nil || len(td) != 1 {
		t.Fatalf("topics after the refusals: %v %v", td.Names(), err)
	}
	produceFetch(t, n.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), "live", "still serving")
}

// max.broker.partitions (KIP-578) refuses a CreateTopics or
// CreatePartitions that would exceed it, with POLICY_VIOLATION, creating
// nothing.
func TestMaxBrokerPartitionsRefused(t *testing.T) {
	n := startRaftNode(t, map[string]string{"max.broker.partitions": "50"})
	ad := kadm.NewClient(n.client())
	if res, err := ad.CreateTopic(ctx(t), 40, 1, nil, "a"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	s0 := n.ctrl.Stats()
	rs, err := ad.CreateTopics(ctx(t), 20, 1, nil, "b")
	res := rs["b"]
	if err != nil || !errors.Is(res.Err, kerr.PolicyViolation) || !strings.Contains(res.ErrMessage, "max.broker.partitions=50") {
		t.Fatalf("over max.broker.partitions: %v %v %q", err, res.Err, res.ErrMessage)
	}
	cp, err := ad.CreatePartitions(ctx(t), 20, "a")
	if err != nil || !errors.Is(cp["a"].Err, kerr.PolicyViolation) {
		t.Fatalf("CreatePartitions over max.broker.partitions: %v %v", err, cp["a"].Err)
	}
	if d := n.ctrl.Stats().Entries - s0.Entries; d != 0 {
		t.Fatalf("%d raft entries written by refused requests", d)
	}
	td, err := ad.ListTopics(ctx(t))
	if err != nil || len(td) != 1 || len(td["a"].Partitions) != 40 || len(n.b.Partitions()) != 40 {
		t.Fatalf("after the refusals: %v, %d partitions of a, %d local", err, len(td["a"].Partitions), len(n.b.Partitions()))
	}
	if cp, err := ad.CreatePartitions(ctx(t), 10, "a"); err != nil || cp["a"].Err != nil {
		t.Fatalf("growing to the limit: %v %v", err, cp["a"].Err)
	}
}

// 200 CreateTopics at once from one client: each is created or refused as
// throttled, and produce, fetch and metadata keep being served meanwhile.
func TestParallelCreateTopics(t *testing.T) {
	n := startRaftNode(t, nil)
	ad := kadm.NewClient(n.client())
	if _, err := ad.CreateTopic(ctx(t), 1, 1, nil, "live"); err != nil {
		t.Fatal(err)
	}
	const creates = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	t0 := time.Now()
	for i := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := ad.CreateTopic(ctx(t), 20, 1, nil, fmt.Sprintf("p%03d", i))
			if err == nil {
				err = res.Err
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				outcomes["created"]++
			case errors.Is(err, kerr.ThrottlingQuotaExceeded):
				outcomes["throttled"]++
			default:
				outcomes[err.Error()]++
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	other := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var worst time.Duration
	serves := 0
	for i := 0; ; i++ {
		select {
		case <-done:
		default:
			worst = max(worst, produceFetch(t, other, "live", fmt.Sprint(i)))
			serves++
			continue
		}
		break
	}
	t.Logf("200 creates in %v: %v; %d produce+fetch meanwhile, slowest %v", time.Since(t0), outcomes, serves, worst)
	if outcomes["created"]+outcomes["throttled"] != creates {
		t.Fatalf("outcomes %v", outcomes)
	}
	if worst > 5*time.Second {
		t.Fatalf("a produce and fetch took %v while topics were created", worst)
	}
	td, err := ad.ListTopics(ctx(t))
	if err != nil || len(td) != outcomes["created"]+1 {
		t.Fatalf("%d topics listed, %d created: %v", len(td), outcomes["created"], err)
	}
}
