package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testproc"
)

// configJSON is `config get --json` output.
type configJSON struct {
	Resource string `json:"resource"`
	Name     string `json:"name"`
	Configs  []struct {
		Key       string `json:"key"`
		Value     string `json:"value"`
		Source    string `json:"source"`
		Sensitive bool   `json:"sensitive"`
	} `json:"configs"`
}

func (c configJSON) get(key string) (value, source string) {
	for _, e := range c.Configs {
		if e.Key == key {
			return e.Value, e.Source
		}
	}
	return "", ""
}

// TestConfigCommands: config get shows what is not at its default (a
// topic override, a server.properties setting) and --all everything;
// config set changes topic configs incrementally, as a separate client
// sees; topic describe lists the same non-default configs.
func TestConfigCommands(t *testing.T) {
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("log.retention.hours=100\nnum.partitions=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, testproc.Options{HTTPPort: -1, ExtraArgs: []string{"--config", props}})
	b := "--bootstrap=" + p.Addr()
	adm := kadm.NewClient(p.Client(t))
	ok(t, "", "topic", "create", "conf", "--config", "cleanup.policy=compact", b)

	var c configJSON
	jsonOut(t, &c, "config", "get", "--topic", "conf", b)
	if c.Resource != "topic" || c.Name != "conf" || len(c.Configs) != 2 {
		t.Errorf("config get --topic: %+v", c)
	}
	if v, src := c.get("cleanup.policy"); v != "compact" || src != "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("cleanup.policy: %s %s", v, src)
	}
	if v, src := c.get("retention.ms"); v != "360000000" || src != "STATIC_BROKER_CONFIG" {
		t.Errorf("retention.ms from log.retention.hours: %s %s", v, src)
	}
	r := ok(t, "", "topic", "describe", "conf", b)
	if !strings.Contains(r.stdout, "PartitionCount: 2 ") || !strings.Contains(r.stdout, "Configs: cleanup.policy=compact,retention.ms=360000000\n") {
		t.Errorf("topic describe with a broker default:\n%s", r)
	}

	c = configJSON{}
	jsonOut(t, &c, "config", "get", "--topic", "conf", "--all", b)
	if v, src := c.get("segment.bytes"); v == "" || src != "DEFAULT_CONFIG" || len(c.Configs) < 20 {
		t.Errorf("config get --all: segment.bytes %q %q, %d configs", v, src, len(c.Configs))
	}

	r = ok(t, "", "config", "set", "--topic", "conf", "retention.ms=1000", "max.message.bytes=30000", b)
	if !strings.Contains(r.stdout, "Set retention.ms=1000 on topic conf.") {
		t.Errorf("config set:\n%s", r)
	}
	for k, want := range map[string]string{"retention.ms": "1000", "max.message.bytes": "30000", "cleanup.policy": "compact"} {
		if v, src := topicConfig(t, adm, "conf", k); v != want || src != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s after config set: %s (source %v)", k, v, src)
		}
	}
	r = ok(t, "", "config", "get", "--topic", "conf", b)
	if f := row(r.stdout, "retention.ms"); len(f) != 3 || f[1] != "1000" || f[2] != "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("config get table row: %q\n%s", f, r)
	}

	c = configJSON{}
	jsonOut(t, &c, "config", "get", "--broker", "1", b)
	if v, src := c.get("log.retention.hours"); c.Resource != "broker" || v != "100" || src != "STATIC_BROKER_CONFIG" {
		t.Errorf("config get --broker 1: %+v", c)
	}
	if v, _ := c.get("auto.create.topics.enable"); v != "" {
		t.Errorf("a default broker config listed without --all: %+v", c)
	}

	// Dynamic broker configs: the cluster default and broker 1's own.
	r = ok(t, "", "config", "set", "--broker-defaults", "log.retention.ms=5000", b)
	if !strings.Contains(r.stdout, "Set log.retention.ms=5000 on the cluster's broker defaults.") {
		t.Errorf("config set --broker-defaults:\n%s", r)
	}
	ok(t, "", "config", "set", "--broker", "1", "message.max.bytes=2000", b)
	c = configJSON{}
	jsonOut(t, &c, "config", "get", "--broker-defaults", b)
	if v, src := c.get("log.retention.ms"); c.Resource != "broker-defaults" || len(c.Configs) != 1 || v != "5000" || src != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Errorf("config get --broker-defaults: %+v", c)
	}
	c = configJSON{}
	jsonOut(t, &c, "config", "get", "--broker", "1", b)
	if v, src := c.get("message.max.bytes"); v != "2000" || src != "DYNAMIC_BROKER_CONFIG" {
		t.Errorf("config get --broker 1 message.max.bytes: %s %s", v, src)
	}
	if v, src := topicConfig(t, adm, "conf", "max.message.bytes"); v != "30000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("the topic's own max.message.bytes under a broker default: %s %v", v, src)
	}
	r = ok(t, "", "config", "delete", "--broker", "1", "message.max.bytes", b)
	if !strings.Contains(r.stdout, "Deleted message.max.bytes from broker 1.") {
		t.Errorf("config delete --broker:\n%s", r)
	}
	c = configJSON{}
	jsonOut(t, &c, "config", "get", "--broker", "1", b)
	if v, _ := c.get("message.max.bytes"); v != "" {
		t.Errorf("message.max.bytes still set after delete: %s", v)
	}
	fails(t, 1, "Cannot update these configs dynamically: Set(num.partitions)", "config", "set", "--broker-defaults", "num.partitions=3", b)
	// Group configs.
	ok(t, "", "config", "set", "--group", "g1", "consumer.session.timeout.ms=50000", b)
	c = configJSON{}
	jsonOut(t, &c, "config", "get", "--group", "g1", b)
	if v, src := c.get("consumer.session.timeout.ms"); c.Resource != "group" || len(c.Configs) != 1 || v != "50000" || src != "GROUP_CONFIG" {
		t.Errorf("config get --group: %+v", c)
	}
	fails(t, 1, "INVALID_CONFIG", "config", "set", "--group", "g1", "consumer.session.timeout.ms=1", b)

	fails(t, 1, "topic nope does not exist", "config", "get", "--topic", "nope", b)
	fails(t, 1, "topic nope does not exist", "config", "set", "--topic", "nope", "retention.ms=1", b)
	fails(t, 1, "broker 7 does not exist", "config", "get", "--broker", "7", b)
	fails(t, 1, "INVALID_CONFIG", "config", "set", "--topic", "conf", "retention.ms=-7x", b)
	for _, args := range [][]string{
		{"config", "get"},
		{"config", "get", "--topic", "conf", "--broker", "1"},
		{"config", "set", "--topic", "conf"},
		{"config", "set", "retention.ms=1"},
		{"config", "set", "--topic", "conf", "retention.ms"},
	} {
		fails(t, 2, "sluice config get TARGET [--all]", append(args, b)...)
	}
}
