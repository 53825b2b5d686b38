package cli

import (
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestProduceLargeRecord: with max.request.size raised in --command-config,
// a 3 MB line round-trips through `sluice produce` and `sluice consume` on
// a topic whose max.message.bytes allows it; with the default (Kafka's
// 1048576) the same line is refused before it is sent, by a message that
// names max.request.size and the limit.
func TestProduceLargeRecord(t *testing.T) {
	p := testproc.Start(t, testproc.Options{HTTPPort: -1})
	b := "--bootstrap-server=" + p.Addr()
	ok(t, "", "topic", "create", "big", "--partitions", "1", "--config", "max.message.bytes=5242880", b)
	big := strings.Repeat("0123456789abcdef", 3<<20/16) // 3 MiB
	cfg := writeProps(t, "max.request.size=4194304\n")

	r := cli(t, big+"\n", "produce", "--topic", "big", b)
	if r.code != 1 || !strings.Contains(r.stderr, "larger than max.request.size (1048576 bytes)") || !strings.Contains(r.stderr, "raise max.request.size") {
		t.Errorf("a 3 MiB record with the default max.request.size:\n%s", r.stderr)
	}

	r = ok(t, big+"\n", "produce", "--topic", "big", "--command-config", cfg, b)
	if !strings.Contains(r.stderr, "Produced 1 records to big.") {
		t.Errorf("produce with max.request.size=4194304:\n%s", r.stderr)
	}
	r = ok(t, "", "consume", "--topic", "big", "--from-beginning", "--max-messages", "1", b)
	if r.stdout != big+"\n" {
		t.Errorf("consumed %d bytes, want the %d produced", len(r.stdout), len(big)+1)
	}

	bad := writeProps(t, "max.request.size=lots\n")
	fails(t, 1, "max.request.size=lots", "produce", "--topic", "big", "--command-config", bad, b)
}
