package controller

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/acl"
)

// ACL bindings are written through the active controller from any node,
// checked (per-binding INVALID_REQUEST), applied on every node, survive a
// snapshot and a full restart, and DeleteAcls filters remove them.
func TestQuorumAcls(t *testing.T) {
	cl := newClusterSnap(t, 8)
	alice := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders-", PatternType: acl.PatternPrefixed,
		Principal: "User:alice", Host: "*", Operation: acl.OpWrite, Permission: acl.PermissionAllow}
	group := acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: "g1", PatternType: acl.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	bad := alice
	bad.PatternType = acl.PatternMatch
	errs, err := cl.follower().CreateAcls(ctxT(t), []acl.Binding{alice, bad, group, alice})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[2] != nil || errs[3] != nil || !errors.Is(errs[1], kerr.InvalidRequest) {
		t.Fatalf("per-binding errors %v, want [nil INVALID_REQUEST nil nil]", errs)
	}
	im := cl.converged()
	if im.Acls.Len() != 2 || !im.Acls.Contains(alice) || !im.Acls.Contains(group) {
		t.Fatalf("stored ACLs %v", im.Acls.Bindings())
	}
	// Enough entries for a snapshot, then a full restart.
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
	cl.closeAll()
	for _, v := range cl.voters {
		cl.start(v.ID)
	}
	cl.waitReady()
	if im := cl.converged(); im.Acls.Len() != 2 {
		t.Fatalf("after restart: %v", im.Acls.Bindings())
	}
	groups := acl.Filter{ResourceType: acl.ResourceGroup, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	anyAll := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	res, err := cl.follower().DeleteAcls(ctxT(t), []acl.Filter{groups, {}, anyAll})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || len(res[0].Deleted) != 1 || res[0].Deleted[0] != group {
		t.Fatalf("filter 0: %+v", res[0])
	}
	if !errors.Is(res[1].Err, kerr.InvalidRequest) {
		t.Fatalf("filter 1 (UNKNOWN fields): %+v, want INVALID_REQUEST", res[1])
	}
	if res[2].Err != nil || len(res[2].Deleted) != 1 || res[2].Deleted[0] != alice {
		t.Fatalf("filter 2: %+v (the group binding must not be listed twice)", res[2])
	}
	if im := cl.converged(); im.Acls.Len() != 0 {
		t.Fatalf("after delete: %v", im.Acls.Bindings())
	}
}
