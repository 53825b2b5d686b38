package config

import (
	"strings"
	"testing"
)

// TestRemoteStorageValues: the object store settings are checked at start.
func TestRemoteStorageValues(t *testing.T) {
	for _, c := range []struct{ key, value, want string }{
		{"sluice.remote.storage.endpoint", "http://127.0.0.1:9000", ""},
		{"sluice.remote.storage.endpoint", "https://s3.eu-west-1.amazonaws.com", ""},
		{"sluice.remote.storage.endpoint", "127.0.0.1:9000", "expected http://host[:port]"},
		{"sluice.remote.storage.endpoint", "ftp://host", "expected http://host[:port]"},
		{"sluice.remote.storage.bucket", "sluice-tiered.v1", ""},
		{"sluice.remote.storage.bucket", "Sluice", "expected an S3 bucket name"},
		{"sluice.remote.storage.bucket", "ab", "expected an S3 bucket name"},
		{"sluice.remote.storage.bucket", "a..b", "expected an S3 bucket name"},
		{"sluice.remote.storage.prefix", "cluster-a/", ""},
		{"sluice.remote.storage.prefix", "/cluster-a", "without a leading /"},
		{"sluice.remote.storage.path.style.access.enable", "yes", "expected a boolean"},
		{"sluice.remote.storage.request.timeout.ms", "0", "expected an int"},
		{"remote.log.metadata.topic.replication.factor", "0", "expected a short"},
		{"rlmm.config.remote.log.metadata.topic.num.partitions", "x", "expected an int"},
		{"remote.log.metadata.topic.retention.ms", "-1", ""},
	} {
		err := ValidateBrokerProps(map[string]string{c.key: c.value})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%s: %v", c.key, c.value, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s=%s: %v, want an error containing %q", c.key, c.value, err, c.want)
		}
	}
	if keys := UnknownBrokerKeys(map[string]string{"rlmm.config.remote.log.metadata.topic.num.partitions": "3"}); len(keys) != 0 {
		t.Errorf("unknown: %v", keys)
	}
}

// TestRemoteLogMetadataTopic: the metadata topic's settings under either
// name, the unprefixed one winning, else Kafka's defaults.
func TestRemoteLogMetadataTopic(t *testing.T) {
	b := Defaults()
	if p, rf, ret := b.RemoteLogMetadataTopic(); p != 50 || rf != 3 || ret != -1 {
		t.Fatalf("defaults %d %d %d", p, rf, ret)
	}
	b.Props["rlmm.config.remote.log.metadata.topic.num.partitions"] = "7"
	b.Props["rlmm.config.remote.log.metadata.topic.replication.factor"] = "2"
	b.Props["remote.log.metadata.topic.replication.factor"] = "1"
	if p, rf, _ := b.RemoteLogMetadataTopic(); p != 7 || rf != 1 {
		t.Fatalf("got %d %d", p, rf)
	}
	b.Props["remote.log.metadata.manager.impl.prefix"] = "mine."
	b.Props["mine.remote.log.metadata.topic.num.partitions"] = "9"
	if p, _, _ := b.RemoteLogMetadataTopic(); p != 9 {
		t.Fatalf("custom prefix: %d", p)
	}
}

// TestRemoteStorageKeysRead: every setting objstore.FromConfig and
// RemoteLogMetadataTopic read is in the table, implemented.
func TestRemoteStorageKeysRead(t *testing.T) {
	for _, k := range []string{"remote.log.storage.system.enable", "sluice.remote.storage.endpoint", "sluice.remote.storage.bucket",
		"sluice.remote.storage.prefix", "sluice.remote.storage.region", "sluice.remote.storage.path.style.access.enable",
		"sluice.remote.storage.credentials.file", "sluice.remote.storage.tls.ca.file", "sluice.remote.storage.request.timeout.ms",
		"remote.log.metadata.manager.impl.prefix", "remote.log.metadata.topic.num.partitions",
		"remote.log.metadata.topic.replication.factor", "remote.log.metadata.topic.retention.ms"} {
		if d, ok := BrokerDef(k); !ok {
			t.Errorf("%s: read but not in the table", k)
		} else if d.Status != StatusImplemented {
			t.Errorf("%s: read but %v", k, d.Status)
		}
	}
}
