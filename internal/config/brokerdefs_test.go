package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateBrokerValues checks one good and bad values of every type
// the table uses; a bad value's error names the key, the value and what
// is expected.
func TestValidateBrokerValues(t *testing.T) {
	cases := []struct {
		key, value string
		want       string // "" means valid; else a substring of the error
	}{
		// int
		{"num.partitions", "3", ""},
		{"num.partitions", " 3 ", ""},
		{"num.partitions", "three", `invalid value "three" for num.partitions: expected an int`},
		{"num.partitions", "0", `invalid value "0" for num.partitions: expected an int at least 1`},
		{"num.partitions", "2147483648", "expected an int"},
		{"node.id", "-3", `invalid value "-3" for node.id: expected an int at least 0`},
		{"node.id", "0", ""},
		// short
		{"offsets.topic.replication.factor", "40000", "expected a short"},
		{"offsets.topic.replication.factor", "0", "expected a short at least 1"},
		// long, including a topic-default synonym validated by its topic config's rule
		{"log.retention.ms", "abc", `invalid value "abc" for log.retention.ms: expected a long`},
		{"log.retention.ms", "-2", `invalid value "-2" for log.retention.ms: expected a long at least -1`},
		{"log.retention.ms", "-1", ""},
		{"log.retention.check.interval.ms", "0", "expected a long at least 1"},
		{"controlled.shutdown.retry.backoff.ms", "1500", ""},
		// size: byte counts are ints or longs, with no unit suffixes
		{"log.segment.bytes", "1GB", `invalid value "1GB" for log.segment.bytes: expected an int`},
		{"log.segment.bytes", "13", "expected an int at least 14"},
		{"log.segment.bytes", "1073741824", ""},
		{"socket.send.buffer.bytes", "-1", ""},
		{"socket.send.buffer.bytes", "-2", "expected an int at least -1"},
		{"log.retention.bytes", "10737418240", ""},
		// double
		{"log.cleaner.min.cleanable.ratio", "0.25", ""},
		{"log.cleaner.min.cleanable.ratio", "half", `invalid value "half" for log.cleaner.min.cleanable.ratio: expected a double`},
		{"log.cleaner.min.cleanable.ratio", "1.5", "expected a double in [0, 1]"},
		// boolean (case-insensitive, as Kafka's ConfigDef)
		{"auto.create.topics.enable", "TRUE", ""},
		{"auto.create.topics.enable", "yes", `invalid value "yes" for auto.create.topics.enable: expected a boolean (true or false)`},
		{"controlled.shutdown.enable", "false", ""},
		// list, with and without an enum
		{"process.roles", "broker,controller", ""},
		{"process.roles", "broker, leader", `invalid value "broker, leader" for process.roles: expected a list of broker, controller`},
		{"log.cleanup.policy", "compact,delete", ""},
		{"log.cleanup.policy", "compact,forever", "expected a list of delete, compact"},
		{"log.dirs", "/a", ""},
		{"log.dirs", "/a,/b", "log.dirs=/a,/b is refused: sluice does not implement more than one log directory"},
		{"listeners", "PLAINTEXT://:9092,CONTROLLER://127.0.0.1:9093", ""},
		{"listeners", "localhost:9092", "expected a list of NAME://host:port"},
		{"listeners", "PLAINTEXT://:99999", "port in [0, 65535]"},
		{"controller.quorum.voters", "1@h:9093,2@h:9193", ""},
		{"controller.quorum.voters", "1-h:9093", "expected a list of id@host:port"},
		{"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,X:TLS", "NAME:PROTOCOL"},
		// enum (string with allowed values)
		{"compression.type", "zstd", ""},
		{"compression.type", "brotli", `invalid value "brotli" for compression.type: expected one of producer, uncompressed, gzip, snappy, lz4, zstd`},
		{"log.message.timestamp.type", "LogAppendTime", ""},
		{"ssl.client.auth", "maybe", "expected one of required, requested, none"},
		// class, password, string
		{"authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer", ""},
		{"authorizer.class.name", "not a class", "expected a class name"},
		{"authorizer.class.name", "kafka.security.authorizer.AclAuthorizer", ""},
		{"authorizer.class.name", "com.example.MyAuthorizer", "StandardAuthorizer"},
		{"allow.everyone.if.no.acl.found", "maybe", "expected"},
		{"ssl.keystore.password", "s3cret", ""},
		{"inter.broker.listener.name", "PLAINTEXT", ""},
	}
	for _, c := range cases {
		err := ValidateBrokerProps(map[string]string{c.key: c.value})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%q: unexpected error %v", c.key, c.value, err)
		case c.want != "" && err == nil:
			t.Errorf("%s=%q: accepted, want an error containing %q", c.key, c.value, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s=%q: error %q, want it to contain %q", c.key, c.value, err, c.want)
		}
	}
}

// TestSynonymSameRule checks that every topic-default broker setting is
// validated exactly like its topic config.
func TestSynonymSameRule(t *testing.T) {
	values := []string{"", "abc", "-3", "-2", "-1", "0", "1", "13", "14", "0.5", "2", "true", "delete", "compact,delete", "zstd", "99999999999"}
	for _, td := range TopicDefs {
		if td.BrokerName == "" {
			continue
		}
		bd, ok := BrokerDef(td.BrokerName)
		if !ok {
			t.Errorf("%s: no broker def for its synonym %s", td.Name, td.BrokerName)
			continue
		}
		for _, v := range values {
			te, be := td.Validate(v), bd.Validate(v)
			if (te == nil) != (be == nil) {
				t.Errorf("%s=%q: topic %s says %v, broker %s says %v", td.Name, v, td.Name, te, td.BrokerName, be)
			}
		}
	}
}

// TestUnknownKeys: unknown keys are reported (for Kafka's warning), known
// ones and per-listener overrides are not.
func TestUnknownKeys(t *testing.T) {
	props := map[string]string{"bogus.setting": "1", "num.io.threads": "16", "num.network.threads": "3", "log.retention.ms": "1", "listener.name.plaintext.ssl.keystore.location": "/x", "zookeeper.connection.timeout.ms": "18000"}
	if err := ValidateBrokerProps(props); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(UnknownBrokerKeys(props), ",")
	if got != "bogus.setting,zookeeper.connection.timeout.ms" {
		t.Errorf("unknown keys %q, want bogus.setting,zookeeper.connection.timeout.ms", got)
	}
	// num.network.threads is at its default: no warning.
	if got := strings.Join(IgnoredBrokerKeys(props), ","); got != "num.io.threads" {
		t.Errorf("ignored keys %q, want num.io.threads", got)
	}
}

// TestKnownKeys: every setting sluice reads, and every default it
// describes, is in the table with the same default.
func TestKnownKeys(t *testing.T) {
	read := []string{"auto.create.topics.enable", "auto.leader.rebalance.enable", "broker.heartbeat.interval.ms",
		"broker.session.timeout.ms", "default.replication.factor", "group.max.size", "leader.imbalance.check.interval.seconds",
		"log.retention.check.interval.ms", "max.connections", "num.partitions", "offset.metadata.max.bytes",
		"offsets.retention.minutes", "offsets.topic.num.partitions", "offsets.topic.replication.factor",
		"offsets.topic.segment.bytes", "producer.id.expiration.ms", "replica.fetch.backoff.ms", "replica.fetch.max.bytes",
		"replica.fetch.min.bytes", "replica.fetch.response.max.bytes", "replica.fetch.wait.max.ms", "replica.lag.time.max.ms",
		"socket.request.max.bytes", "unclean.leader.election.enable", "advertised.listeners", "node.id", "broker.id",
		"listeners", "log.dirs", "log.dir", "controller.quorum.voters", "log.retention.minutes", "log.retention.hours",
		"log.roll.hours", "controlled.shutdown.enable", "controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms"}
	for _, k := range read {
		if d, ok := BrokerDef(k); !ok {
			t.Errorf("%s: read by sluice but not in the table", k)
		} else if d.Status == StatusIgnored {
			t.Errorf("%s: read by sluice but marked ignored", k)
		}
	}
	for k, v := range BrokerDefaults {
		d, ok := BrokerDef(k)
		if !ok {
			t.Errorf("BrokerDefaults[%s]: not in the table", k)
			continue
		}
		if d.Default != v {
			t.Errorf("%s: BrokerDefaults says %q, the table %q", k, v, d.Default)
		}
		if err := d.Validate(v); err != nil {
			t.Errorf("%s: default invalid: %v", k, err)
		}
	}
	for _, d := range AllBrokerDefs() {
		if d.Doc == "" && d.Status == StatusImplemented {
			t.Errorf("%s: no doc", d.Name)
		}
		if d.Default != "" {
			if err := d.Validate(d.Default); err != nil {
				t.Errorf("%s: default invalid: %v", d.Name, err)
			}
		}
	}
}

// TestKafkaServerProperties: the stock Kafka 4.0 server.properties loads
// with no invalid and no unknown key.
func TestKafkaServerProperties(t *testing.T) {
	b := Defaults()
	if err := b.LoadFile(filepath.Join("testdata", "kafka-4.0-server.properties")); err != nil {
		t.Fatal(err)
	}
	if u := UnknownBrokerKeys(b.Props); len(u) > 0 {
		t.Errorf("unknown keys in Kafka's own file: %v", u)
	}
	if b.NodeID != 1 || b.Listen != ":9092" || b.ControllerListen != ":9093" || b.DataDir != "/tmp/kraft-combined-logs" {
		t.Errorf("loaded node %d listen %q controller %q data %q", b.NodeID, b.Listen, b.ControllerListen, b.DataDir)
	}
	if v, _ := b.TopicDefault("log.retention.ms"); v != "604800000" {
		t.Errorf("log.retention.hours=168 gives log.retention.ms %q", v)
	}
}

// TestLoadFileInvalid: a bad value in a file is an error naming the file,
// the key and the value, and nothing of the file is applied.
func TestLoadFileInvalid(t *testing.T) {
	p := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(p, []byte("node.id=7\nnum.partitions=many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := Defaults()
	err := b.LoadFile(p)
	if err == nil || !strings.Contains(err.Error(), `invalid value "many" for num.partitions: expected an int`) || !strings.Contains(err.Error(), p) {
		t.Fatalf("LoadFile: %v", err)
	}
	if b.NodeID != 1 || len(b.Props) != 0 {
		t.Errorf("a rejected file was partly applied: node %d props %v", b.NodeID, b.Props)
	}
}

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/configuration.md")

// TestConfigurationReference fails when docs/configuration.md is not what
// Reference renders (go generate ./internal/config rewrites it).
func TestConfigurationReference(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	want := Reference()
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go generate ./internal/config)", err)
	}
	if string(got) != want {
		t.Errorf("%s is stale: run go generate ./internal/config", path)
	}
	for _, d := range AllBrokerDefs() {
		if !strings.Contains(string(got), "| `"+d.Name+"` |") {
			t.Errorf("%s missing from %s", d.Name, path)
		}
	}
}

// TestExampleServerProperties: config/server.properties loads, with no
// unknown key.
func TestExampleServerProperties(t *testing.T) {
	b := Defaults()
	if err := b.LoadFile(filepath.Join("..", "..", "config", "server.properties")); err != nil {
		t.Fatal(err)
	}
	if u := UnknownBrokerKeys(b.Props); len(u) > 0 {
		t.Errorf("unknown keys: %v", u)
	}
	if b.Listen != "127.0.0.1:9092" || b.ControllerListen != "127.0.0.1:9093" || b.DataDir != "./sluice-data" {
		t.Errorf("listen %q controller %q data %q", b.Listen, b.ControllerListen, b.DataDir)
	}
}

func TestThrottledReplicasValidation(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "*": true, "0:1": true, "0:1,1:2": true, " 0:1 , 3:4 ": true,
		"0": false, "a:1": false, "0:1,*": false, "0:-1": false, "0:1,": false} {
		err := checkThrottledReplicas(v)
		if (err == nil) != ok {
			t.Errorf("%q: %v", v, err)
		}
	}
}
