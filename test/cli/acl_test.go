package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/testproc"
)

// aclJSON is `acl list|create|delete --json` output.
type aclJSON struct {
	ACLs    []aclEntry `json:"acls"`
	Created []aclEntry `json:"created"`
	Deleted []aclEntry `json:"deleted"`
}

type aclEntry struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
}

// writeProps writes a server.properties file.
func writeProps(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestACLCommands: on a broker with StandardAuthorizer, acl create adds
// the ACLs kafka-acls.sh --add would (one per principal, host, operation
// and resource; prefixed patterns), a separate franz-go client sees them,
// acl list filters by resource, pattern type and principal, acl delete
// removes only what matches; a broker without an authorizer answers
// SECURITY_DISABLED; bad command lines exit 2.
func TestACLCommands(t *testing.T) {
	props := writeProps(t, "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:ANONYMOUS\n")
	p := testproc.Start(t, testproc.Options{HTTPPort: -1, ExtraArgs: []string{"--config", props}})
	b := "--bootstrap-server=" + p.Addr()
	adm := kadm.NewClient(p.Client(t))

	var a aclJSON
	jsonOut(t, &a, "acl", "create", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
		"--operation", "Read", "--operation", "describe", "--topic", "orders", "--group", "g1", b)
	if len(a.Created) != 8 {
		t.Fatalf("create: %d ACLs, want 8 (2 principals x 2 operations x 2 resources): %+v", len(a.Created), a)
	}
	r := ok(t, "", "acl", "create", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.1", "--operation", "Write",
		"--topic", "pay", "--resource-pattern-type", "prefixed", b)
	if row(r.stdout, "User:mallory", "10.0.0.1", "WRITE", "DENY", "TOPIC", "pay", "PREFIXED") == nil {
		t.Errorf("create table:\n%s", r)
	}
	ok(t, "", "acl", "create", "--allow-principal", "User:ops", "--operation", "All", "--cluster", b)

	// What a separate client sees.
	all, err := adm.DescribeACLs(ctxT(t), kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range all {
		n += len(d.Described)
	}
	if n != 10 {
		t.Errorf("DescribeACLs: %d ACLs, want 10: %+v", n, all)
	}

	jsonOut(t, &a, "acl", "list", b)
	if len(a.ACLs) != 10 {
		t.Errorf("list: %d ACLs, want 10: %+v", len(a.ACLs), a.ACLs)
	}
	jsonOut(t, &a, "acl", "list", "--topic", "orders", b)
	if len(a.ACLs) != 4 {
		t.Errorf("list --topic orders: %+v", a.ACLs)
	}
	jsonOut(t, &a, "acl", "list", "--topic", "payments", b)
	if len(a.ACLs) != 0 {
		t.Errorf("list --topic payments (literal): %+v", a.ACLs)
	}
	jsonOut(t, &a, "acl", "list", "--topic", "payments", "--resource-pattern-type", "match", b)
	if len(a.ACLs) != 1 || a.ACLs[0].Principal != "User:mallory" || a.ACLs[0].Host != "10.0.0.1" || a.ACLs[0].Permission != "DENY" {
		t.Errorf("list --topic payments --resource-pattern-type match: %+v", a.ACLs)
	}
	jsonOut(t, &a, "acl", "list", "--principal", "User:bob", b)
	if len(a.ACLs) != 4 {
		t.Errorf("list --principal User:bob: %+v", a.ACLs)
	}
	r = ok(t, "", "acl", "list", "--cluster", b)
	if row(r.stdout, "User:ops", "*", "ALL", "ALLOW", "CLUSTER", "kafka-cluster", "LITERAL") == nil {
		t.Errorf("list --cluster:\n%s", r)
	}

	jsonOut(t, &a, "acl", "delete", "--topic", "orders", "--allow-principal", "User:alice", "--operation", "Read", b)
	if len(a.Deleted) != 1 || a.Deleted[0].Principal != "User:alice" || a.Deleted[0].Operation != "READ" {
		t.Errorf("delete alice READ orders: %+v", a.Deleted)
	}
	jsonOut(t, &a, "acl", "delete", "--group", "g1", b)
	if len(a.Deleted) != 4 {
		t.Errorf("delete --group g1: %+v", a.Deleted)
	}
	jsonOut(t, &a, "acl", "list", b)
	if len(a.ACLs) != 5 {
		t.Errorf("list after the deletes: %d ACLs, want 5: %+v", len(a.ACLs), a.ACLs)
	}

	fails(t, 2, "needs a resource", "acl", "delete", b)
	fails(t, 2, "invalid --operation", "acl", "create", "--allow-principal", "User:x", "--operation", "Fly", "--topic", "t", b)
	fails(t, 2, "expected User:NAME", "acl", "create", "--allow-principal", "alice", "--operation", "Read", "--topic", "t", b)
	fails(t, 2, "invalid --resource-pattern-type", "acl", "create", "--allow-principal", "User:x", "--operation", "Read", "--topic", "t", "--resource-pattern-type", "match", b)

	plain := testproc.Start(t, testproc.Options{HTTPPort: -1})
	fails(t, 1, "SECURITY_DISABLED", "acl", "create", "--allow-principal", "User:x", "--operation", "Read", "--topic", "t", "--bootstrap", plain.Addr())
	fails(t, 1, "SECURITY_DISABLED", "acl", "list", "--bootstrap", plain.Addr())
}
