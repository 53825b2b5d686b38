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

// kafkajsDir is the node project holding compat.js and its pinned
// dependencies (kafkajs 2.2.4 and codec plugins).
func kafkajsDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("kafkajs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); err != nil {
		msg := "test/compat/kafkajs/node_modules missing: run scripts/install-test-deps.sh (npm ci)"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (CI=%q)", msg, os.Getenv("CI"))
		}
		t.Skip(msg + "; skipped outside CI")
	}
	return dir
}

type kafkajsSummary struct {
	OK             bool             `json:"ok"`
	Produced       int              `json:"produced"`
	Consumed       int              `json:"consumed"`
	Fetches        int              `json:"fetches"`
	HighWatermarks map[string]int64 `json:"highWatermarks"`
	Versions       map[string]any   `json:"versions"`
}

// TestKafkaJS: KafkaJS 2.2.4 creates the topic (admin), produces with each
// codec (plain and idempotent), and reads everything back with its own
// Fetch (compat.js); then franz-go reads the same records and checks them
// and the codec of the stored batches.
func TestKafkaJS(t *testing.T) {
	node := testproc.RequireTool(t, "node")
	dir := kafkajsDir(t)
	t.Logf("node %s", strings.TrimSpace(run(t, 10*time.Second, "", node, "--version")))
	b := startBroker(t)
	for _, idem := range []bool{false, true} {
		for _, codec := range codecs {
			name := codec
			if idem {
				name = "idempotent/" + codec
			}
			t.Run(name, func(t *testing.T) {
				topic := uniqueTopic(t)
				w := want{N: 2000, Prefix: "kafkajs-" + strings.ReplaceAll(name, "/", "-")}
				args := []string{filepath.Join(dir, "compat.js"),
					"--broker", b.Addr(), "--topic", topic, "--codec", codec,
					"--count", strconv.Itoa(w.N), "--prefix", w.Prefix, "--partitions", "3"}
				if idem {
					args = append(args, "--idempotent")
				}
				out := run(t, 150*time.Second, "", node, args...)
				var sum kafkajsSummary
				line := strings.TrimSpace(out)
				if i := strings.LastIndexByte(line, '\n'); i >= 0 {
					line = line[i+1:]
				}
				if err := json.Unmarshal([]byte(line), &sum); err != nil || !sum.OK {
					t.Fatalf("compat.js: bad summary (%v):\n%s", err, out)
				}
				if sum.Produced != w.N || sum.Consumed != w.N {
					t.Fatalf("compat.js: produced %d, consumed %d, want %d", sum.Produced, sum.Consumed, w.N)
				}
				t.Logf("kafkajs: %d fetches, high watermarks %v, API versions used %v", sum.Fetches, sum.HighWatermarks, sum.Versions)

				fr := consumeFranz(t, b.Addr(), topic, 3, w.N, 30*time.Second)
				verify(t, w, fr)
				checkCodec(t, fr, codec)
				checkProducerIDs(t, fr, idem)
			})
		}
	}
}
