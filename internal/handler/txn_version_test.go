package handler_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/metrics"
)

// TestTransactionVersions: with transaction.version 2 finalized (the
// default) franz-go takes the KIP-890 part 2 path, sending no
// AddPartitionsToTxn (Produce v12 adds the partition); with
// sluice.transaction.version=1 it sends AddPartitionsToTxn as before.
// Both commit, and read_committed sees exactly the committed records.
func TestTransactionVersions(t *testing.T) {
	for _, tv := range []string{"2", "1"} {
		props := map[string]string{"sluice.transaction.version": tv}
		for k, v := range txnProps {
			props[k] = v
		}
		n := startNode(t, "", props)
		topic := "tv" + tv
		if err := n.b.CreateTopic(topic, 1, 1, nil, false); err != nil {
			t.Fatal(err)
		}
		adds := func() float64 { return testutil.ToFloat64(metrics.Requests.WithLabelValues("AddPartitionsToTxn")) }
		p := n.client(kgo.TransactionalID("tx-version-"+tv), kgo.DefaultProduceTopic(topic))
		// franz-go opts in to transaction version 2 at the end of its
		// first transaction (it re-initializes its producer id then):
		// count from the second one.
		var before float64
		for i := -1; i < 3; i++ {
			if i == 0 {
				before = adds()
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("transaction version %s: %v", tv, err)
			}
			commit := kgo.TryCommit
			if i == 1 {
				commit = kgo.TryAbort
			}
			if err := p.EndTransaction(ctx(t), commit); err != nil {
				t.Fatalf("transaction version %s: %v", tv, err)
			}
		}
		sent := adds() - before
		switch {
		case tv == "2" && sent != 0:
			t.Fatalf("transaction version 2: the client sent %v AddPartitionsToTxn", sent)
		case tv == "1" && sent == 0:
			t.Fatal("transaction version 1: the client sent no AddPartitionsToTxn")
		}
		if got := consumeIso(t, n, topic, true); !equalStrings(got, []string{"-1", "0", "2"}) {
			t.Fatalf("transaction version %s: read_committed = %v", tv, got)
		}
		n.stop()
	}
}

// TestTransactionVersion2BackToBack: a franz-go producer on transaction
// version 2 runs transactions back to back over three partitions, each
// one's first batches arriving while the previous one's markers are still
// on their way (the partition adds must wait for them, and the new
// transaction's batches must not be taken for the old one's): every
// transaction commits and read_committed sees every record once.
func TestTransactionVersion2BackToBack(t *testing.T) {
	n := startNode(t, "", txnProps)
	if err := n.b.CreateTopic("b2b", 3, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	p := n.client(kgo.TransactionalID("tx-b2b"), kgo.DefaultProduceTopic("b2b"))
	const txns, per = 20, 300
	for i := 0; i < txns; i++ {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < per; j++ {
			p.Produce(ctx(t), &kgo.Record{Value: []byte(fmt.Sprintf("%d-%d", i, j))}, nil)
		}
		if err := p.Flush(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx(t), kgo.TryCommit); err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
	}
	cl := n.client(kgo.ConsumeTopics("b2b"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	for len(seen) < txns*per {
		fs := cl.PollFetches(ctx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for v, k := range seen {
		if k != 1 {
			t.Fatalf("%s read %d times", v, k)
		}
	}
}
