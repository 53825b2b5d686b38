package cli

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestKafkaFlagNames: the flag names of Kafka's tools work where sluice's
// differ: --bootstrap-server, --topic and --group for the positional
// names, kafka-configs.sh's --add-config (with a bracketed list value),
// --delete-config and --entity-type/--entity-name, kafka-topics.sh's
// --alter --partitions and kafka-leader-election.sh's --election-type.
func TestKafkaFlagNames(t *testing.T) {
	p := testproc.Start(t, testproc.Options{HTTPPort: -1})
	b := "--bootstrap-server=" + p.Addr()
	adm := kadm.NewClient(p.Client(t))

	ok(t, "", "topic", "create", "--topic", "kn", "--partitions", "1", "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]", b)
	if v, _ := topicConfig(t, adm, "kn", "cleanup.policy"); v != "compact,delete" {
		t.Errorf("cleanup.policy after --add-config: %q", v)
	}
	if v, _ := topicConfig(t, adm, "kn", "retention.ms"); v != "60000" {
		t.Errorf("retention.ms after --add-config: %q", v)
	}
	var desc topicJSON
	jsonOut(t, &desc, "topic", "describe", "--topic", "kn", b)
	if len(desc.Topics) != 1 || desc.Topics[0].Name != "kn" {
		t.Fatalf("topic describe --topic kn: %+v", desc)
	}
	ok(t, "", "topic", "add-partitions", "--topic", "kn", "--partitions", "2", b)
	jsonOut(t, &desc, "topic", "describe", "kn", b)
	if desc.Topics[0].PartitionCount != 2 {
		t.Errorf("after add-partitions --partitions 2: %+v", desc.Topics[0])
	}
	ok(t, "", "topic", "alter", "--topic", "kn", "--delete-config", "retention.ms,cleanup.policy", b)
	if _, src := topicConfig(t, adm, "kn", "retention.ms"); src == 1 { // TOPIC_CONFIG
		t.Errorf("retention.ms still set on the topic after --delete-config")
	}

	ok(t, "", "config", "set", "--entity-type", "topics", "--entity-name", "kn", "--add-config", "retention.ms=1000,segment.ms=3600000", b)
	if v, _ := topicConfig(t, adm, "kn", "segment.ms"); v != "3600000" {
		t.Errorf("segment.ms after config set --entity-type topics: %q", v)
	}
	var c configJSON
	jsonOut(t, &c, "config", "get", "--entity-type", "topics", "--entity-name", "kn", b)
	if v, _ := c.get("retention.ms"); v != "1000" {
		t.Errorf("config get --entity-type topics: retention.ms %q: %+v", v, c)
	}
	ok(t, "", "config", "delete", "--entity-type", "topics", "--entity-name", "kn", "--delete-config", "retention.ms,segment.ms", b)
	if _, src := topicConfig(t, adm, "kn", "segment.ms"); src == 1 {
		t.Errorf("segment.ms still set on the topic after config delete --delete-config")
	}
	fails(t, 2, "use `sluice quota`", "config", "get", "--entity-type", "users", "--entity-name", "alice", b)

	ok(t, "x\ny\n", "produce", "--topic", "kn", b)
	ok(t, "", "consume", "--topic", "kn", "--group", "kg", "--from-beginning", "--max-messages", "2", b)
	var g groupJSON
	jsonOut(t, &g, "group", "describe", "--group", "kg", b)
	if len(g.Groups) != 1 || g.Groups[0].Group != "kg" {
		t.Errorf("group describe --group kg: %+v", g)
	}
	ok(t, "", "group", "reset-offsets", "--group", "kg", "--topic", "kn", "--to-earliest", "--execute", b)
	ok(t, "", "elect", "--topic", "kn", "--election-type", "PREFERRED", b)
	ok(t, "", "group", "delete", "--group", "kg", b)
	ok(t, "", "topic", "delete", "--topic", "kn", b)
	r := ok(t, "", "topic", "list", b)
	if row(r.stdout, "kn") != nil {
		t.Errorf("kn listed after topic delete --topic kn:\n%s", r)
	}
}
