package compat

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// confluentPython returns a Python interpreter that can import
// confluent_kafka (confluent-kafka-python over librdkafka): /usr/bin/python3
// first, where Debian's python3-confluent-kafka installs, then python3 on
// PATH (which may be another installation without the module). Without
// one the test is skipped, or fails if CI is set:
// scripts/install-test-deps.sh installs the package.
func confluentPython(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/python3", "python3"} {
		py, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, py, "-c",
			"import confluent_kafka as c; print(c.version()[0], c.libversion()[0])").Output()
		cancel()
		if err == nil {
			f := strings.Fields(string(out))
			if len(f) == 2 {
				t.Logf("%s: confluent-kafka %s, librdkafka %s", py, f[0], f[1])
				return py
			}
		}
	}
	msg := "no python3 (/usr/bin/python3, python3 on PATH) can import confluent_kafka: run scripts/install-test-deps.sh (Debian package python3-confluent-kafka)"
	if ci := os.Getenv("CI"); ci != "" {
		t.Fatalf("%s; CI=%q", msg, ci)
	}
	t.Skip(msg + "; skipped outside CI")
	return ""
}

type confluentSummary struct {
	OK              bool    `json:"ok"`
	Version         string  `json:"version"`
	Librdkafka      string  `json:"librdkafka"`
	Delivered       int     `json:"delivered"`
	ReadCommitted   int     `json:"read_committed"`
	ReadUncommitted int     `json:"read_uncommitted"`
	ProduceSeconds  float64 `json:"produce_seconds"`
}

// TestTxnLibrdkafka: librdkafka's transactional producer, through
// confluent-kafka-python (txn_confluent.py), runs txnPlan against a 3-node
// cluster: init_transactions, then per transaction begin_transaction,
// produce to explicit partitions, flush (every delivery report at its
// expected offset), send_offsets_to_transaction (the group's offset),
// commit_transaction or abort_transaction. The script
// reads the topic back with librdkafka's consumer at both isolation
// levels; checkTxnTopic then does the same with franz-go.
func TestTxnLibrdkafka(t *testing.T) {
	py := confluentPython(t)
	script, err := filepath.Abs("txn_confluent.py")
	if err != nil {
		t.Fatal(err)
	}
	// Stat, besides checking, makes go test's cache depend on the script.
	if _, err := os.Stat(script); err != nil {
		t.Fatal(err)
	}
	c := startTxnCluster(t)
	topic := createTxnTopic(t, c)
	txnID := topic + "-txn"
	prefix := "librdkafka"
	out := run(t, 120*time.Second, "", py, script,
		"--brokers", strings.Join(c.Addrs(false), ","), "--topic", topic, "--txn-id", txnID,
		"--prefix", prefix, "--plan", txnPlanArg(), "--group", txnGroup(txnID),
		"--partitions", strconv.Itoa(txnPartitions), "--per-partition", strconv.Itoa(txnPerPartition))
	line := strings.TrimSpace(out)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	var sum confluentSummary
	if err := json.Unmarshal([]byte(line), &sum); err != nil || !sum.OK {
		t.Fatalf("txn_confluent.py: bad summary (%v):\n%s", err, out)
	}
	committed, all := txnCounts()
	if sum.Delivered != all || sum.ReadCommitted != committed || sum.ReadUncommitted != all {
		t.Fatalf("txn_confluent.py: delivered %d, read_committed %d, read_uncommitted %d; want %d, %d, %d",
			sum.Delivered, sum.ReadCommitted, sum.ReadUncommitted, all, committed, all)
	}
	t.Logf("confluent-kafka %s (librdkafka %s): %d records in %d transactions in %.3fs",
		sum.Version, sum.Librdkafka, sum.Delivered, len(txnPlan), sum.ProduceSeconds)
	checkTxnTopic(t, c, topic, txnID, prefix)
}
