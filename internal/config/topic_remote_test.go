package config

import "testing"

// TestRemoteStorageConfigRules: Kafka's rules for remote.storage.enable:
// no compacted topic, local.retention.* within retention.*, and no
// turning it off once on.
func TestRemoteStorageConfigRules(t *testing.T) {
	for _, c := range []struct {
		set map[string]string
		ok  bool
	}{
		{map[string]string{"remote.storage.enable": "true"}, true},
		{map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}, false},
		{map[string]string{"remote.storage.enable": "false", "cleanup.policy": "compact"}, true},
		{map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "100", "retention.bytes": "50"}, false},
		{map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "50", "retention.bytes": "100"}, true},
		{map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "-1", "retention.bytes": "100"}, false},
		{map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "100"}, true}, // retention.bytes -1
		{map[string]string{"remote.storage.enable": "true", "local.retention.ms": "700000000"}, false},
		{map[string]string{"remote.storage.enable": "true", "local.retention.ms": "60000"}, true},
		{map[string]string{"local.retention.ms": "700000000"}, true}, // not tiered: not checked, as Kafka
	} {
		if err := CheckTopicConfigs(c.set); (err == nil) != c.ok {
			t.Errorf("%v: %v, want ok=%v", c.set, err, c.ok)
		}
	}
	on, off := map[string]string{"remote.storage.enable": "true"}, map[string]string{}
	if err := CheckTopicConfigChange(on, off); err == nil {
		t.Error("turning remote storage off was accepted")
	}
	if err := CheckTopicConfigChange(off, on); err != nil {
		t.Errorf("turning remote storage on: %v", err)
	}
}
