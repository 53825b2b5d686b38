// Package transactions runs Kafka transactions against real sluice
// processes: markers travel between brokers (WriteTxnMarkers through the
// inter-broker clients), and the transaction coordinator fails over.
package transactions

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
)

var props = map[string]string{
	"transaction.state.log.num.partitions": "3",
	"offsets.topic.num.partitions":         "3",
	"replica.lag.time.max.ms":              "2000",
	"broker.session.timeout.ms":            "3000",
	"broker.heartbeat.interval.ms":         "500",
	"auto.leader.rebalance.enable":         "false",
}

func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// runTxn produces prefix-0..2 to partitions 0..2 in one transaction and
// commits or aborts it.
func runTxn(t *testing.T, p *kgo.Client, commit kgo.TransactionEndTry, prefix string) {
	t.Helper()
	ctx := tctx(t, 60*time.Second)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < 3; part++ {
		r := &kgo.Record{Topic: "tx", Partition: part, Value: []byte(fmt.Sprintf("%s-%d", prefix, part))}
		if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", r.Value, err)
		}
	}
	if err := p.EndTransaction(ctx, commit); err != nil {
		t.Fatalf("end %s: %v", prefix, err)
	}
}

// consume reads topic tx from the start at an isolation level until it has
// want records (and a second more), and returns their values sorted.
func consume(t *testing.T, c *testcluster.Cluster, committed bool, want int) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := c.Client(kgo.ConsumeTopics("tx"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	var vals []string
	deadline := time.Now().Add(30 * time.Second)
	var extra time.Time
	for time.Now().Before(deadline) && (extra.IsZero() || time.Now().Before(extra)) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
		cancel()
		if len(vals) >= want && extra.IsZero() {
			extra = time.Now().Add(time.Second)
		}
	}
	sort.Strings(vals)
	return vals
}

// txnCoordinator asks FindCoordinator which node coordinates id.
func txnCoordinator(t *testing.T, cl *kgo.Client, id string) int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey = 1, id
	for i := 0; ; i++ {
		resp, err := req.RequestWith(tctx(t, 10*time.Second), cl)
		if err == nil && resp.ErrorCode == 0 {
			return resp.NodeID
		}
		if i == 100 {
			t.Fatalf("FindCoordinator %s: %v %v", id, err, kerr.ErrorForCode(resp.ErrorCode))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTransactionsAcrossBrokers: a franz-go transactional producer writes
// to three partitions led by three different brokers, commits one
// transaction and aborts another; read_committed consumers see only the
// committed records. Then the coordinator is killed (SIGKILL): a new
// producer instance with the same transactional id is served by the new
// leader of its __transaction_state partition, which loaded the state,
// and its transaction commits.
func TestTransactionsAcrossBrokers(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
	c.CreateTopic("tx", 3, 3, nil, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	const id = "tx-cluster"
	producer := func() *kgo.Client {
		return c.Client(kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RetryTimeout(60*time.Second))
	}
	p := producer()
	runTxn(t, p, kgo.TryCommit, "c1")
	runTxn(t, p, kgo.TryAbort, "a1")

	want := []string{"c1-0", "c1-1", "c1-2"}
	if got := consume(t, c, true, 3); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed = %v, want %v", got, want)
	}
	if got := consume(t, c, false, 6); len(got) != 6 {
		t.Fatalf("read_uncommitted = %v, want 6 records", got)
	}

	coord := txnCoordinator(t, c.Client(), id)
	t.Logf("killing coordinator %d", coord)
	c.Node(coord).Kill()
	p.Close()
	p2 := producer()
	runTxn(t, p2, kgo.TryCommit, "c2")
	want = []string{"c1-0", "c1-1", "c1-2", "c2-0", "c2-1", "c2-2"}
	if got := consume(t, c, true, 6); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after failover, read_committed = %v, want %v", got, want)
	}
	if now := txnCoordinator(t, c.Client(), id); now == coord {
		t.Fatalf("coordinator still %d", now)
	}
}

// TestCoordinatorFailoverMidTransaction: the coordinator is killed while a
// transaction is open (its records written, EndTxn not yet sent). The new
// coordinator loaded the ongoing transaction with its partitions: either
// the producer's commit reaches it and it completes the transaction, or
// (franz-go gives up on an EndTxn whose connection failed) a new producer
// instance's InitProducerId makes it abort the transaction, markers
// included. Every transaction is all or nothing for read_committed
// consumers, every acknowledged commit is there, and transactions commit
// after the failover.
func TestCoordinatorFailoverMidTransaction(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
	c.CreateTopic("tx", 3, 3, nil, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	const id = "tx-failover"
	producer := func() *kgo.Client {
		return c.Client(kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RetryTimeout(60*time.Second), kgo.TransactionTimeout(60*time.Second))
	}
	p := producer()
	committed := map[string]bool{}
	const n = 8
	for i := 0; i < n; i++ {
		prefix := fmt.Sprintf("t%d", i)
		ctx := tctx(t, 90*time.Second)
		err := p.BeginTransaction()
		for part := int32(0); part < 3 && err == nil; part++ {
			r := &kgo.Record{Topic: "tx", Partition: part, Value: []byte(fmt.Sprintf("%s-%d", prefix, part))}
			err = p.ProduceSync(ctx, r).FirstErr()
		}
		if i == 3 && err == nil {
			coord := txnCoordinator(t, c.Client(), id)
			t.Logf("killing coordinator %d with transaction %s open", coord, prefix)
			c.Node(coord).Kill()
		}
		if err == nil {
			err = p.EndTransaction(ctx, kgo.TryCommit)
		}
		if err != nil {
			t.Logf("transaction %s: %v", prefix, err)
			p.Close()
			p = producer()
			continue
		}
		committed[prefix] = true
	}
	if !committed[fmt.Sprintf("t%d", n-1)] {
		t.Fatal("no commit after the failover")
	}
	t.Logf("the transaction open during the failover committed: %v", committed["t3"])
	got := consume(t, c, true, 3*len(committed))
	per := map[string]int{}
	for _, v := range got {
		per[v[:len(v)-2]]++
	}
	for prefix, k := range per {
		if k != 3 {
			t.Errorf("transaction %s: %d of 3 records read committed", prefix, k)
		}
	}
	for prefix := range committed {
		if per[prefix] != 3 {
			t.Errorf("acknowledged transaction %s: %d of 3 records", prefix, per[prefix])
		}
	}
	t.Logf("%d transactions committed: %v", len(committed), got)
}
