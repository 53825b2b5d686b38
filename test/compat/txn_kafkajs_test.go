package compat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
)

type kafkajsTxnSummary struct {
	OK              bool           `json:"ok"`
	Delivered       int            `json:"delivered"`
	ReadCommitted   int            `json:"readCommitted"`
	ReadUncommitted int            `json:"readUncommitted"`
	AbortedFiltered map[string]int `json:"abortedFiltered"`
	Versions        map[string]any `json:"versions"`
}

// TestTxnKafkaJS: KafkaJS 2.2.4's transactional producer (kafkajs/txn.js)
// runs txnPlan against a 3-node cluster: producer.transaction(), txn.send
// with every record of the transaction, txn.commit() or txn.abort(). The
// script reads the topic back at both isolation levels with KafkaJS's
// Fetch and its consumer's aborted-record filtering (which must drop
// exactly the aborted records at read_committed); checkTxnTopic then does
// the same with franz-go.
func TestTxnKafkaJS(t *testing.T) {
	node := testproc.RequireTool(t, "node")
	dir := kafkajsDir(t)
	// Stat, besides checking, makes go test's cache depend on the script.
	script := filepath.Join(dir, "txn.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatal(err)
	}
	c := startTxnCluster(t)
	topic := createTxnTopic(t, c)
	txnID := topic + "-txn"
	prefix := "kafkajs"
	out := run(t, 150*time.Second, "", node, script,
		"--brokers", strings.Join(c.Addrs(false), ","), "--topic", topic, "--txn-id", txnID,
		"--prefix", prefix, "--plan", txnPlanArg(),
		"--partitions", strconv.Itoa(txnPartitions), "--per-partition", strconv.Itoa(txnPerPartition))
	line := strings.TrimSpace(out)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	var sum kafkajsTxnSummary
	if err := json.Unmarshal([]byte(line), &sum); err != nil || !sum.OK {
		t.Fatalf("txn.js: bad summary (%v):\n%s", err, out)
	}
	committed, all := txnCounts()
	if sum.Delivered != all || sum.ReadCommitted != committed || sum.ReadUncommitted != all {
		t.Fatalf("txn.js: delivered %d, read_committed %d, read_uncommitted %d; want %d, %d, %d",
			sum.Delivered, sum.ReadCommitted, sum.ReadUncommitted, all, committed, all)
	}
	// The read_committed Fetch returned the aborted records with the
	// aborted transactions, and KafkaJS dropped them; read_uncommitted has
	// no list.
	if rc, ru := sum.AbortedFiltered["read_committed"], sum.AbortedFiltered["read_uncommitted"]; rc != all-committed || ru != 0 {
		t.Fatalf("txn.js: KafkaJS dropped %d aborted records at read_committed and %d at read_uncommitted, want %d and 0", rc, ru, all-committed)
	}
	t.Logf("kafkajs: API versions used %v", sum.Versions)
	checkTxnTopic(t, c, topic, txnID, prefix)
}
