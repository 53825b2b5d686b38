package controller

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"testing"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/vfs"
)

// TestMachineImportsSingleNodeStore: a new cluster started with an
// earlier release's single-node store (metadata.Local) takes its cluster
// id, topics (ids, configs, partition epochs), ACLs, SCRAM credentials,
// quotas and producer-id counter, and once its one broker registers and
// is unfenced every imported partition is led by it again, at
// kraft.version 1 (dynamic voters).
func TestMachineImportsSingleNodeStore(t *testing.T) {
	ctx := context.Background()
	fsys := vfs.NewMem()
	l, err := metadata.OpenLocal(fsys, "/meta", config.Defaults(), metadata.Broker{ID: 1, Host: "h", Port: 9092}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CreateTopic(ctx, "orders", 3, 1, nil, map[string]string{"retention.ms": "1000"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AllocateProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	b := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	if errs, err := l.CreateAcls(ctx, []acl.Binding{b}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	cred := metadata.ScramCredential{Salt: []byte("salt"), Iterations: 4096, StoredKey: []byte("s"), ServerKey: []byte("k")}
	if errs, err := l.AlterScramCredentials(ctx, []metadata.ScramOp{{User: "bob", Mechanism: "SCRAM-SHA-256", Cred: cred}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	bob := metadata.QuotaEntity{User: metadata.QuotaName{Set: true, Name: "bob"}}
	if errs, err := l.AlterClientQuotas(ctx, []metadata.QuotaAlteration{{Entity: bob, Ops: []metadata.QuotaOp{{Key: "producer_byte_rate", Value: 1024}}}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	old, err := metadata.ReadStore(fsys, "/meta")
	if err != nil || old == nil {
		t.Fatal("ReadStore:", old, err)
	}

	m := NewMachine(MachineOptions{Seed: 1, Import: old})
	im := m.Image()
	if im.ClusterID != old.ClusterID {
		t.Fatalf("cluster id %q, want the store's %q", im.ClusterID, old.ClusterID)
	}
	if im.FeatureLevel(metadata.FeatureKRaftVersion) != 1 {
		t.Errorf("kraft.version %d, want 1", im.FeatureLevel(metadata.FeatureKRaftVersion))
	}
	ep, err := m.Register(metadata.Broker{ID: 1, Host: "h", Port: 9092, Incarnation: "i"}, PreviousEpochKept)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := m.Heartbeat(1, ep, m.Image().Offset, false); err != nil || r.Fenced {
		t.Fatalf("heartbeat: %+v %v", r, err)
	}
	im = m.Image()
	ot, nt := old.Topics["orders"], im.Topics["orders"]
	if nt == nil || nt.ID != ot.ID || !maps.Equal(nt.Configs, ot.Configs) || len(nt.Partitions) != 3 {
		t.Fatalf("topic %+v, want %+v", nt, ot)
	}
	for i, p := range nt.Partitions {
		if p.Leader != 1 || !reflect.DeepEqual(p.ISR, []int32{1}) || !reflect.DeepEqual(p.Replicas, []int32{1}) || p.LeaderEpoch < ot.Partitions[i].LeaderEpoch {
			t.Errorf("partition %d: %+v (was %+v), want led by 1", i, p, ot.Partitions[i])
		}
	}
	if im.NextProducerID < old.NextProducerID {
		t.Errorf("next producer id %d, below the store's %d", im.NextProducerID, old.NextProducerID)
	}
	enc := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if enc(im.Acls) != enc(old.Acls) || enc(im.Scram) != enc(old.Scram) || enc(im.Quotas) != enc(old.Quotas) {
		t.Errorf("ACLs %s SCRAM %s quotas %s, want %s %s %s", enc(im.Acls), enc(im.Scram), enc(im.Quotas), enc(old.Acls), enc(old.Scram), enc(old.Quotas))
	}

	// The import is a new cluster's first entry only: an image that has a
	// cluster id ignores it.
	tx := newTxn(im)
	other := *old
	other.ClusterID = "another"
	tx.apply(&record{Type: recImport, Import: &other}, im.Offset+1)
	if tx.im.ClusterID != im.ClusterID {
		t.Errorf("an import on a cluster changed its id to %q", tx.im.ClusterID)
	}
}
