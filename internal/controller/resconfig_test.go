package controller

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// Dynamic broker and group configs are written through the active
// controller from any node as ResourceConfig records, checked there,
// applied on every node, and survive a snapshot and a full restart.
func TestQuorumResourceConfigs(t *testing.T) {
	cl := newClusterSnap(t, 8)
	def := metadata.ConfigResource{Type: metadata.ResourceBroker}
	two := metadata.ConfigResource{Type: metadata.ResourceBroker, Name: "2"}
	grp := metadata.ConfigResource{Type: metadata.ResourceGroup, Name: "g"}
	f := cl.follower()
	for _, c := range []struct {
		r   metadata.ConfigResource
		ops []metadata.ConfigOp
	}{
		{def, []metadata.ConfigOp{{Name: "log.retention.ms", Value: "1000"}}},
		{two, []metadata.ConfigOp{{Name: "leader.replication.throttled.rate", Value: "1000"}}},
		{grp, []metadata.ConfigOp{{Name: "consumer.heartbeat.interval.ms", Value: "6000"}}},
	} {
		if err := f.AlterResourceConfigs(ctxT(t), c.r, c.ops, false, false); err != nil {
			t.Fatalf("%v: %v", c.r, err)
		}
	}
	err := f.AlterResourceConfigs(ctxT(t), def, []metadata.ConfigOp{{Name: "node.id", Value: "3"}}, false, false)
	if !errors.Is(err, kerr.InvalidRequest) || err.Error() != "Cannot update these configs dynamically: Set(node.id)" {
		t.Fatalf("read-only key through a follower: %v", err)
	}
	check := func(im *metadata.Image) {
		t.Helper()
		if v := im.ResourceConfigs(def)["log.retention.ms"]; v != "1000" {
			t.Errorf("cluster default log.retention.ms %q", v)
		}
		if v := im.ResourceConfigs(two)["leader.replication.throttled.rate"]; v != "1000" {
			t.Errorf("broker 2 throttle %q", v)
		}
		if v := im.ResourceConfigs(grp)["consumer.heartbeat.interval.ms"]; v != "6000" {
			t.Errorf("group config %q", v)
		}
	}
	check(cl.converged())
	// Past a snapshot and a restart: replayed from the snapshot and the
	// log after it.
	for i := 0; i < 10; i++ {
		if err := cl.active().CreateTopic(ctxT(t), "s"+string(rune('a'+i)), 1, 1, nil, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	for id, n := range cl.nodes {
		if err := n.Snapshot(); err != nil {
			t.Fatalf("snapshot on %d: %v", id, err)
		}
	}
	if err := f.AlterResourceConfigs(ctxT(t), grp, nil, true, false); err != nil {
		t.Fatal(err)
	}
	cl.closeAll()
	for _, v := range cl.voters {
		cl.start(v.ID)
	}
	cl.waitReady()
	im := cl.converged().Clone()
	if g := im.ResourceConfigs(grp); g != nil {
		t.Errorf("group configs replaced by none, after restart: %v", g)
	}
	im.SetResourceConfigs(grp, map[string]string{"consumer.heartbeat.interval.ms": "6000"})
	check(im)
}

// A ResourceConfig record replaces the resource's set and replays the
// same on every node; an empty set removes the resource.
func TestApplyResourceConfigRecord(t *testing.T) {
	base := emptyImage()
	r := metadata.ConfigResource{Type: metadata.ResourceBroker, Name: "1"}
	tx := newTxn(base)
	tx.apply(&record{Type: recResourceConfig, Resource: &r, Configs: map[string]string{"a.b": "1"}}, 5)
	tx.apply(&record{Type: recResourceConfig, Resource: &r, Configs: map[string]string{"c.d": "2"}}, 5)
	if got := tx.im.BrokerConfigs; len(got) != 1 || len(got["1"]) != 1 || got["1"]["c.d"] != "2" {
		t.Fatalf("after two records: %v", got)
	}
	if base.BrokerConfigs != nil {
		t.Fatalf("the base image changed: %v", base.BrokerConfigs)
	}
	tx.apply(&record{Type: recResourceConfig, Resource: &r}, 6)
	if tx.im.BrokerConfigs != nil {
		t.Fatalf("after an empty set: %v", tx.im.BrokerConfigs)
	}
}
