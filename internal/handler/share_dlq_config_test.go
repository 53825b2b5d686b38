package handler_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterGroupConfig sets one group config with IncrementalAlterConfigs and
// returns the resource's error (nil: accepted).
func alterGroupConfig(t *testing.T, n *node, group, name, value string) error {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, &value
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp := request[*kmsg.IncrementalAlterConfigsResponse](t, n.client(), req)
	return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
}

// setShareVersion finalizes share.version at level (UpdateFeatures).
func setShareVersion(t *testing.T, n *node, level int16) {
	t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "share.version", level, 1
	if n.b.Image().ShareVersion() > level {
		u.UpgradeType = 2 // safe downgrade
	}
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	req.TimeoutMillis = 10000
	if r := request[*kmsg.UpdateFeaturesResponse](t, n.client(), req); r.ErrorCode != 0 {
		t.Fatalf("share.version %d: %v", level, kerr.ErrorForCode(r.ErrorCode))
	}
	waitFor(t, func() bool { return n.b.Image().ShareVersion() == level }, "share.version")
}

// TestShareDLQGroupConfigValidation: errors.deadletterqueue.topic.name is
// checked as Kafka's ShareGroupDLQValidator does (KIP-1191): a legal topic
// name, not an internal __ one, with the errors.deadletterqueue.topic.name.prefix
// (dlq.), and an existing topic must have errors.deadletterqueue.group.enable;
// at share.version 1 it cannot be set at all. Each refusal is
// INVALID_CONFIG and changes nothing.
func TestShareDLQGroupConfigValidation(t *testing.T) {
	rn := startRaftNode(t, nil)
	n := rn.node
	const group = "g"
	if v := n.b.Image().ShareVersion(); v != 2 {
		t.Fatalf("a new cluster finalizes share.version %d, want 2", v)
	}
	createTopic(t, n.client(), "dlq.closed", 1, nil)
	yes := "true"
	createTopic(t, n.client(), "dlq.open", 1, map[string]*string{"errors.deadletterqueue.group.enable": &yes})
	waitFor(t, func() bool { return n.b.Image().Topics["dlq.open"] != nil }, "dlq.open")

	for _, name := range []string{"orders.dead", "__dlq.x", "dlq.bad name", "dlq.closed"} {
		if err := alterGroupConfig(t, n, group, "errors.deadletterqueue.topic.name", name); err != kerr.InvalidConfig {
			t.Fatalf("%q: %v, want INVALID_CONFIG", name, err)
		}
	}
	if _, ok := n.b.Image().GroupConfigs[group]["errors.deadletterqueue.topic.name"]; ok {
		t.Fatal("a refused name was stored")
	}
	for _, name := range []string{"dlq.open", "dlq.later"} { // dlq.later does not exist yet
		if err := alterGroupConfig(t, n, group, "errors.deadletterqueue.topic.name", name); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
	}
	if err := alterGroupConfig(t, n, group, "errors.deadletterqueue.copy.record.enable", "maybe"); err != kerr.InvalidConfig {
		t.Fatalf("copy.record.enable=maybe: %v, want INVALID_CONFIG", err)
	}

	setShareVersion(t, n, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := alterGroupConfig(t, n, "g2", "errors.deadletterqueue.topic.name", "dlq.open")
		if err == kerr.InvalidConfig {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("at share.version 1: %v, want INVALID_CONFIG", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	setShareVersion(t, n, 2)
	if err := alterGroupConfig(t, n, "g2", "errors.deadletterqueue.topic.name", "dlq.open"); err != nil {
		t.Fatalf("at share.version 2 again: %v", err)
	}
}
