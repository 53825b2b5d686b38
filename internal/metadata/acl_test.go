package metadata

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/vfs"
)

// The single-node store keeps ACLs in its image file: they survive a
// reopen, and DeleteAcls removes what its filters match.
func TestLocalAcls(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Broker{}
	open := func() *Local {
		l, err := OpenLocal(vfs.Default, dir, cfg, Broker{ID: 1, Host: "localhost", Port: 9092}, "")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	b := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "t", PatternType: acl.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	bad := b
	bad.Principal = "alice"
	errs, err := l.CreateAcls(context.Background(), []acl.Binding{b, bad})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], kerr.InvalidRequest) {
		t.Fatalf("CreateAcls: %v %v", errs, err)
	}
	l.Close()
	l = open()
	if !l.Image().Acls.Contains(b) || l.Image().Acls.Len() != 1 {
		t.Fatalf("after reopen: %v", l.Image().Acls.Bindings())
	}
	name := "t"
	res, err := l.DeleteAcls(context.Background(), []acl.Filter{{ResourceType: acl.ResourceTopic, ResourceName: &name,
		PatternType: acl.PatternMatch, Operation: acl.OpAny, Permission: acl.PermissionAny}})
	if err != nil || res[0].Err != nil || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteAcls: %+v %v", res, err)
	}
	if l.Image().Acls.Len() != 0 {
		t.Fatalf("after delete: %v", l.Image().Acls.Bindings())
	}
}
