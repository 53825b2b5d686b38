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
// with every record of the transaction, txn.sendOffsets (the group's
// offset), txn.commit() or txn.abort(). The
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
	// KafkaJS 2.2.4 does not retry a TxnOffsetCommit answered
	// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE or
	// NOT_COORDINATOR (error codes 14-16): its retry lists name them so,
	// but its error table gives them their old names (GROUP_LOAD_IN_PROGRESS,
	// GROUP_COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR_FOR_GROUP), so
	// txn.sendOffsets fails at once. On a fresh cluster its FindCoordinator
	// for the group creates __consumer_offsets, and the node named may not
	// serve the new partition yet when the TxnOffsetCommit arrives (sluice
	// answers COORDINATOR_NOT_AVAILABLE; Kafka's answers there,
	// NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, fail it the same
	// way). As in an application whose consumers are in the group, the
	// coordinator is made ready first.
	t.Logf("group %s: coordinator %d", txnGroup(txnID), waitGroupCoordinator(t, c, txnGroup(txnID)))
	out := run(t, 150*time.Second, "", node, script,
		"--brokers", strings.Join(c.Addrs(false), ","), "--topic", topic, "--txn-id", txnID,
		"--prefix", prefix, "--plan", txnPlanArg(), "--group", txnGroup(txnID),
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
