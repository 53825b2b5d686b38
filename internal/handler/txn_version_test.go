package handler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// TestEmptyAbortVersion2: under transaction version 2 an EndTxn abort of
// a transaction with nothing in it succeeds and bumps the epoch (Kafka 4;
// franz-go aborts whenever it is unsure whether anything was produced);
// its retry at the old epoch is answered the same; an empty commit is
// still INVALID_TXN_STATE.
func TestEmptyAbortVersion2(t *testing.T) {
	n := startNode(t, "", txnProps)
	cl := n.client()
	id := "tx-empty-abort"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 60000
	var pid int64
	var epoch int16
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := request[*kmsg.InitProducerIDResponse](t, cl, ip)
		if r.ErrorCode == 0 {
			pid, epoch = r.ProducerID, r.ProducerEpoch
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
		time.Sleep(50 * time.Millisecond)
	}
	end := func(e int16, commit bool) *kmsg.EndTxnResponse {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 5
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, e, commit
		return request[*kmsg.EndTxnResponse](t, cl, req)
	}
	r := end(epoch, false)
	if r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("empty abort: %v, epoch %d (want %d)", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch, epoch+1)
	}
	// The retry, once the abort completed (CONCURRENT_TRANSACTIONS while
	// it does).
	for r = end(epoch, false); r.ErrorCode == kerr.ConcurrentTransactions.Code && time.Now().Before(deadline); r = end(epoch, false) {
		time.Sleep(20 * time.Millisecond)
	}
	if r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("its retry: %v, epoch %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch)
	}
	if r := end(epoch+1, true); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("empty commit: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(r.ErrorCode))
	}
}
