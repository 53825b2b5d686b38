package handler_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnFencing: two franz-go producers with one transactional id. The
// second one's InitProducerId fences the first in the middle of its
// transaction (the coordinator aborts it, epoch bumped); nothing the first
// writes after the fence is visible to read_committed consumers: its
// next records and its commit fail, and the aborted transaction's record
// stays invisible. The second commits.
func TestTxnFencing(t *testing.T) {
	n := startNode(t, "", txnProps)
	if err := n.b.CreateTopic("fence", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	opts := []kgo.Opt{kgo.TransactionalID("tx-fence"), kgo.DefaultProduceTopic("fence")}
	old := n.client(opts...)
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx(t), &kgo.Record{Value: []byte("old-before-fence")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	newer := n.client(opts...)
	if err := newer.BeginTransaction(); err != nil { // InitProducerId: fences old
		t.Fatal(err)
	}
	if err := newer.ProduceSync(ctx(t), &kgo.Record{Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	afterErr := old.ProduceSync(ctx(t), &kgo.Record{Value: []byte("old-after-fence")}).FirstErr()
	endErr := old.EndTransaction(ctx(t), kgo.TryCommit)
	if afterErr == nil && endErr == nil {
		t.Fatal("the fenced producer wrote and committed after the fence")
	}
	t.Logf("fenced producer: produce %v, commit %v", afterErr, endErr)

	if err := newer.EndTransaction(ctx(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := consumeIso(t, n, "fence", true); !equalStrings(got, []string{"new"}) {
		t.Fatalf("read_committed = %v, want [new]", got)
	}
}
