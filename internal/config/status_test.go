package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestKafkaKeysHaveStatus: every broker key of Kafka 4.2
// (testdata/kafka-4.2-broker-keys.txt) is in the table, so it has a
// status; a newer Kafka list dropped in shows its new keys here. Every
// refused key accepts its default and names the values it refuses.
func TestKafkaKeysHaveStatus(t *testing.T) {
	keys := KafkaBrokerKeys()
	if len(keys) < 300 {
		t.Fatalf("only %d Kafka 4.2 broker keys read from the list", len(keys))
	}
	c := KafkaCoverage()
	if len(c.Missing) > 0 {
		t.Errorf("Kafka 4.2 broker keys without a status in sluice: %v", c.Missing)
	}
	if c.Total() != len(keys) {
		t.Errorf("coverage %v counts %d keys, the list has %d", c, c.Total(), len(keys))
	}
	t.Logf("Kafka 4.2 broker keys: %s", c)
	for _, d := range AllBrokerDefs() {
		if d.Status == StatusRefused && d.Refuses == "" {
			t.Errorf("%s: refused, but the values it refuses are not named (Refuses)", d.Name)
		}
		if d.Refuse != nil && d.Refuse(d.Default) != "" {
			t.Errorf("%s: its default %q is refused", d.Name, d.Default)
		}
		if d.Refuse != nil && d.Refuses == "" {
			t.Errorf("%s: refuses values not named in the reference (Refuses)", d.Name)
		}
	}
}

// TestRefusedValues: a value asking for what sluice does not implement,
// and that would change membership, durability, security or where data
// lives, is refused with a message naming the key and why; the default
// and harmless values of the same keys are accepted.
func TestRefusedValues(t *testing.T) {
	for _, c := range []struct{ key, value, want string }{
		{"remote.log.storage.system.enable", "true", ""},
		{"remote.log.storage.manager.class.name", "io.aiven.kafka.tieredstorage.RemoteStorageManager", "a custom RemoteStorageManager is not implemented"},
		{"remote.log.storage.manager.class.name", "", ""},
		{"remote.log.metadata.manager.class.name", "com.example.Rlmm", "a custom RemoteLogMetadataManager"},
		{"log.dirs", "/d1,/d2", "log.dirs=/d1,/d2 is refused: sluice does not implement more than one log directory"},
		{"log.dirs", "/d1", ""},
		{"log.dir", "/d1, /d2", "log.dir=/d1, /d2 is refused"},
		{"controller.quorum.auto.join.enable", "true", "controller.quorum.auto.join.enable=true is refused"},
		{"controller.quorum.auto.join.enable", "false", ""},
		{"transaction.two.phase.commit.enable", "true", "two-phase commit"},
		{"delegation.token.secret.key", "s3cret", "delegation.token.secret.key=[hidden] is refused: delegation token"},
		{"delegation.token.secret.key", "", ""},
		{"principal.builder.class", "com.example.MyPrincipalBuilder", "a custom KafkaPrincipalBuilder is not implemented"},
		{"principal.builder.class", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", ""},
		{"controller.listener.names", "CTRL", "sluice's controller listener is the one named CONTROLLER"},
		{"controller.listener.names", "CONTROLLER", ""},
		{"config.providers", "file", "config.providers=file is refused"},
		{"sasl.server.callback.handler.class", "com.example.Handler", "it decides who authenticates"},
		{"create.topic.policy.class.name", "com.example.Policy", "CreateTopicPolicy"},
		{"ssl.engine.factory.class", "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory", ""},
		{"sasl.oauthbearer.jwt.validator.class", "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator", ""},
		{"sasl.oauthbearer.jwt.validator.class", "com.example.Validator", "a custom JwtValidator"},
		{"zookeeper.connect", "zk1:2181,zk2:2181", "zookeeper.connect=zk1:2181,zk2:2181 is refused: ZooKeeper mode"},
		{"authorizer.class.name", "com.example.Authorizer", "com.example.Authorizer"},
		{"authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer", ""},
		// A per-listener override is refused as its setting.
		{"listener.name.sasl_ssl.sasl.server.callback.handler.class", "com.example.Handler", "is refused"},
	} {
		err := ValidateBrokerProps(map[string]string{c.key: c.value})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%s: refused: %v", c.key, c.value, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s=%s: %v, want an error containing %q", c.key, c.value, err, c.want)
		}
	}
}

// TestMetadataLogDir: metadata.log.dir is accepted when it is the data
// directory and refused elsewhere.
func TestMetadataLogDir(t *testing.T) {
	b := Defaults()
	b.DataDir = "/var/sluice"
	b.Props["metadata.log.dir"] = "/var/sluice/"
	if err := b.CheckDirs(); err != nil {
		t.Errorf("metadata.log.dir = the data directory: %v", err)
	}
	b.Props["metadata.log.dir"] = "/var/kraft-meta"
	if err := b.CheckDirs(); err == nil || !strings.Contains(err.Error(), "metadata.log.dir=/var/kraft-meta is refused") {
		t.Errorf("metadata.log.dir elsewhere: %v", err)
	}
}

// TestIgnoredKeysWarned: the keys `sluice serve` warns about are the
// ignored ones set to other than their default (compared by value), per
// listener too; implemented, refused and unknown keys are not among them.
func TestIgnoredKeysWarned(t *testing.T) {
	props := map[string]string{
		"num.io.threads":                                    "16",                 // ignored, not the default: warned
		"num.network.threads":                               " 3 ",                // ignored, the default: not warned
		"log.flush.interval.ms":                             "1000",               // ignored (sluice fsyncs every append)
		"remote.log.reader.threads":                         "10",                 // default
		"group.coordinator.rebalance.protocols":             "classic , consumer", // default, spaced
		"listener.name.sasl_ssl.sasl.kerberos.service.name": "kafka",              // ignored, per listener
		"num.partitions":                                    "6",                  // implemented
		"remote.log.storage.manager.class.name":             "",                   // refused key at a harmless value
		"bogus.key":                                         "1",                  // unknown: Kafka's own warning
	}
	got := strings.Join(IgnoredBrokerKeys(props), ",")
	want := "listener.name.sasl_ssl.sasl.kerberos.service.name,log.flush.interval.ms,num.io.threads"
	if got != want {
		t.Errorf("warned keys %q, want %q", got, want)
	}
}

// TestKafkaServerPropertiesNotRefused: Kafka's stock server.properties
// (combined mode) loads, passes the start checks that come after the
// flags, and sets no refused key to a refused value.
func TestKafkaServerPropertiesNotRefused(t *testing.T) {
	b := Defaults()
	if err := b.LoadFile(filepath.Join("testdata", "kafka-4.0-server.properties")); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckListeners(); err != nil {
		t.Errorf("CheckListeners: %v", err)
	}
	if err := b.CheckRoles(); err != nil {
		t.Errorf("CheckRoles: %v", err)
	}
	if err := b.CheckDirs(); err != nil {
		t.Errorf("CheckDirs: %v", err)
	}
	for k, v := range b.Props {
		if d, ok := BrokerDef(k); ok && d.Refuse != nil {
			if why := d.Refuse(v); why != "" {
				t.Errorf("%s=%s refused: %s", k, v, why)
			}
		}
	}
	t.Logf("warned about: %v", IgnoredBrokerKeys(b.Props))
}
