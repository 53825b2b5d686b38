// Package rack holds real-process tests of rack awareness: follower
// fetching (KIP-392).
package rack

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// batchBrokers records which broker served each fetched batch.
type batchBrokers struct {
	mu    sync.Mutex
	nodes map[int32]int
}

func (b *batchBrokers) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	b.mu.Lock()
	b.nodes[meta.NodeID] += m.NumRecords
	b.mu.Unlock()
}

// TestFollowerFetching: three brokers in racks r1-r3 with Kafka's
// RackAwareReplicaSelector; a topic led by broker 1. A franz-go consumer
// in rack r2 (client.rack) is sent to broker 2 and reads every record
// from it; Metadata gives each broker's rack; the leader answers a
// consumer of its own rack, or of no rack, itself; a follower serves a
// v11+ consumer up to its high watermark and refuses a v10 one.
func TestFollowerFetching(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3,
		Props: map[string]string{"auto.create.topics.enable": "false", "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"},
		NodeProps: map[int]map[string]string{
			1: {"broker.rack": "r1"}, 2: {"broker.rack": "r2"}, 3: {"broker.rack": "r3"},
		}})
	const topic, n = "racked", 200
	c.CreateTopic(topic, 1, -1, nil, [][]int32{{1, 2, 3}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// Metadata names each broker's rack.
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c.Node(1).Client(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if b.Rack == nil || *b.Rack != "r"+strconv.Itoa(int(b.NodeID)) {
			t.Fatalf("broker %d rack %v, want r%d", b.NodeID, b.Rack, b.NodeID)
		}
	}

	// A consumer in r2 reads everything from broker 2.
	seen := &batchBrokers{nodes: map[int32]int{}}
	cons := c.Client(kgo.ConsumeTopics(topic), kgo.Rack("r2"), kgo.WithHooks(seen),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(got) {
				t.Fatalf("record at offset %d, want %d", r.Offset, got)
			}
			got++
		})
	}
	seen.mu.Lock()
	if seen.nodes[2] != n {
		t.Fatalf("records served by broker: %v, want all %d from broker 2 (rack r2)", seen.nodes, n)
	}
	seen.mu.Unlock()

	fetch := func(node int32, version int16, rack string) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.Rack = -1, 0, 1<<20, rack
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		cl := c.Node(node).Client(t, kgo.MaxVersions(kversions(version)))
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("fetch v%d from %d: %v", version, node, err)
		}
		return resp.Topics[0].Partitions[0]
	}
	// The leader sends a consumer of r2 to broker 2, with no records.
	if p := fetch(1, 11, "r2"); p.ErrorCode != 0 || p.PreferredReadReplica != 2 || len(p.RecordBatches) != 0 || p.HighWatermark != n {
		t.Fatalf("leader, rack r2: err %v preferred %d, %d record bytes, hw %d", kerr.ErrorForCode(p.ErrorCode), p.PreferredReadReplica, len(p.RecordBatches), p.HighWatermark)
	}
	// Its own rack, no rack, or a rack without replicas: the leader serves.
	for _, rack := range []string{"r1", "", "r9"} {
		if p := fetch(1, 11, rack); p.ErrorCode != 0 || p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
			t.Fatalf("leader, rack %q: err %v preferred %d, %d record bytes", rack, kerr.ErrorForCode(p.ErrorCode), p.PreferredReadReplica, len(p.RecordBatches))
		}
	}
	// A follower serves a v11 consumer, not a v10 one, up to its own HW,
	// which follows the leader's by a fetch round (up to
	// replica.fetch.wait.max.ms).
	testcluster.WaitFor(t, 10*time.Second, "broker 3 learns the high watermark", func() (bool, string) {
		p := fetch(3, 11, "r3")
		return p.HighWatermark == n, "hw " + strconv.FormatInt(p.HighWatermark, 10)
	})
	if p := fetch(3, 11, "r3"); p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != n {
		t.Fatalf("follower, v11: err %v, %d record bytes, hw %d", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches), p.HighWatermark)
	}
	if p := fetch(3, 10, ""); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("follower, v10: err %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(p.ErrorCode))
	}
}

// kversions caps Fetch at v.
func kversions(v int16) *kversion.Versions {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(1, v)
	return vs
}
