package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testproc"
)

// topicJSON is `topic list` / `topic describe` --json output.
type topicJSON struct {
	Topics []struct {
		Name              string            `json:"name"`
		ID                string            `json:"id"`
		Internal          bool              `json:"internal"`
		PartitionCount    int               `json:"partition_count"`
		ReplicationFactor int               `json:"replication_factor"`
		Configs           map[string]string `json:"configs"`
		Partitions        []partitionJSON   `json:"partitions"`
	} `json:"topics"`
}

type partitionJSON struct {
	Topic           string  `json:"topic"`
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	Error           string  `json:"error"`
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// topicConfig returns a topic config's value and source, as a separate
// franz-go client sees it.
func topicConfig(t *testing.T, adm *kadm.Client, topic, key string) (string, kmsg.ConfigSource) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctxT(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs of %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue(), c.Source
		}
	}
	t.Fatalf("topic %s has no config %s", topic, key)
	return "", 0
}

// TestTopicCommands: create, list, describe, alter, add-partitions and
// delete on a single node, each checked through the CLI's own table and
// JSON output and through a separate franz-go admin client; unknown
// topics, bad usage and an unreachable bootstrap give their messages and
// exit statuses.
func TestTopicCommands(t *testing.T) {
	p := testproc.Start(t, testproc.Options{HTTPPort: -1})
	b := "--bootstrap=" + p.Addr()
	adm := kadm.NewClient(p.Client(t))

	r := ok(t, "", "topic", "create", "orders", "--partitions", "3", "--config", "retention.ms=60000", b, "--config", "max.message.bytes=20000")
	if !strings.Contains(r.stdout, "Created topic orders (3 partitions, replication factor 1)") {
		t.Errorf("create output:\n%s", r)
	}
	md, err := adm.Metadata(ctxT(t), "orders")
	if err != nil || len(md.Topics["orders"].Partitions) != 3 {
		t.Fatalf("orders after create: %v %+v", err, md.Topics["orders"])
	}
	if v, src := topicConfig(t, adm, "orders", "retention.ms"); v != "60000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms after create: %s (source %v)", v, src)
	}
	fails(t, 1, "TOPIC_ALREADY_EXISTS", "topic", "create", "orders", b)
	ok(t, "", "topic", "create", "events", b) // broker defaults: 1 partition

	// list: table and JSON.
	r = ok(t, "", "topic", "list", b)
	if f := row(r.stdout, "orders"); len(f) < 3 || f[1] != "3" || f[2] != "1" {
		t.Errorf("list row of orders: %q\n%s", f, r)
	}
	if row(r.stdout, "events") == nil || row(r.stdout, "__consumer_offsets") != nil {
		t.Errorf("list:\n%s", r)
	}
	var list topicJSON
	jsonOut(t, &list, "topic", "list", b)
	if len(list.Topics) != 2 || list.Topics[0].Name != "events" || list.Topics[1].Name != "orders" || list.Topics[1].PartitionCount != 3 || list.Topics[1].ID == "" {
		t.Errorf("list --json: %+v", list)
	}

	// describe: partitions and the configs set on the topic.
	r = ok(t, "", "topic", "describe", "orders", b)
	if !strings.Contains(r.stdout, "Topic: orders") || !strings.Contains(r.stdout, "PartitionCount: 3") ||
		!strings.Contains(r.stdout, "Configs: max.message.bytes=20000,retention.ms=60000\n") {
		t.Errorf("describe header:\n%s", r)
	}
	for part := range 3 {
		if f := row(r.stdout, fmt.Sprint(part)); len(f) < 4 || f[1] != "1" || f[2] != "1" || f[3] != "1" {
			t.Errorf("describe row of partition %d: %q\n%s", part, f, r)
		}
	}
	var desc topicJSON
	jsonOut(t, &desc, "topic", "describe", "orders", "events", b)
	if len(desc.Topics) != 2 || desc.Topics[0].Name != "orders" || len(desc.Topics[0].Partitions) != 3 ||
		desc.Topics[0].Configs["retention.ms"] != "60000" || len(desc.Topics[0].Configs) != 2 || desc.Topics[1].Configs != nil {
		t.Errorf("describe --json: %+v", desc)
	}
	for i, pt := range desc.Topics[0].Partitions {
		if pt.Partition != int32(i) || pt.Leader != 1 || fmt.Sprint(pt.Replicas) != "[1]" || fmt.Sprint(pt.ISR) != "[1]" {
			t.Errorf("describe --json partition %d: %+v", i, pt)
		}
	}

	// alter: set one, delete one (incremental: max.message.bytes stays).
	ok(t, "", "topic", "alter", "orders", "--config", "cleanup.policy=compact", "--delete-config", "retention.ms", b)
	if v, src := topicConfig(t, adm, "orders", "cleanup.policy"); v != "compact" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("cleanup.policy after alter: %s (source %v)", v, src)
	}
	if _, src := topicConfig(t, adm, "orders", "retention.ms"); src == kmsg.ConfigSourceDynamicTopicConfig {
		t.Error("retention.ms still set on the topic after --delete-config")
	}
	if v, _ := topicConfig(t, adm, "orders", "max.message.bytes"); v != "20000" {
		t.Errorf("max.message.bytes after an incremental alter: %s", v)
	}
	fails(t, 1, "INVALID_CONFIG", "topic", "alter", "orders", "--config", "retention.ms=soon", b)

	// add-partitions: --count is the new total.
	r = ok(t, "", "topic", "add-partitions", "orders", "--count", "5", b)
	if !strings.Contains(r.stdout, "now has 5 partitions (was 3)") {
		t.Errorf("add-partitions:\n%s", r)
	}
	testWait(t, 10*time.Second, "orders with 5 partitions in Metadata", func() bool {
		md, err := adm.Metadata(ctxT(t), "orders")
		return err == nil && len(md.Topics["orders"].Partitions) == 5
	})
	fails(t, 1, "--count must be larger", "topic", "add-partitions", "orders", "--count", "4", b)

	// Unknown topics.
	for _, args := range [][]string{
		{"topic", "describe", "orders", "nope"},
		{"topic", "alter", "nope", "--config", "retention.ms=1"},
		{"topic", "add-partitions", "nope", "--count", "2"},
		{"topic", "delete", "nope"},
	} {
		fails(t, 1, "topic nope does not exist", append(args, b)...)
	}

	// delete: the existing one goes, the unknown one is reported.
	r = fails(t, 1, "topic nope does not exist", "topic", "delete", "orders", "nope", b)
	if !strings.Contains(r.stdout, "Deleted topic orders.") {
		t.Errorf("delete output:\n%s", r)
	}
	testWait(t, 10*time.Second, "orders deleted", func() bool {
		tds, err := adm.ListTopics(ctxT(t))
		return err == nil && !tds.Has("orders") && tds.Has("events")
	})

	// Bad usage: exit 2 with the usage text.
	for _, args := range [][]string{
		{"topic"},
		{"topic", "frobnicate"},
		{"topic", "create"},
		{"topic", "create", "a", "b"},
		{"topic", "create", "x", "--partitions", "three"},
		{"topic", "create", "x", "--config", "novalue"},
		{"topic", "alter", "events"},
		{"topic", "describe", "--no-such-flag"},
		{"topic", "list", "--timeout", "0s"},
	} {
		r := fails(t, 2, "usage:", append(args, b)...)
		if !strings.Contains(r.stderr, "sluice topic create NAME") {
			t.Errorf("usage text:\n%s", r)
		}
	}
	if r := cli(t, "", "topic", "--help"); r.code != 0 || !strings.Contains(r.stderr, "sluice topic describe NAME") {
		t.Errorf("topic --help:\n%s", r)
	}

	// A bootstrap nobody listens on.
	ports, err := testproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("127.0.0.1:%d", ports[0])
	fails(t, 1, "cannot reach bootstrap "+dead+": ", "topic", "list", "--bootstrap", dead, "--timeout", "5s")
}

// testWait polls cond every 100 ms until it holds, failing the test after
// timeout.
func testWait(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
