package acl

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func allow(t ResourceType, pt PatternType, name, principal string, op Operation) Binding {
	return Binding{ResourceType: t, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: PermissionAllow}
}

func deny(t ResourceType, pt PatternType, name, principal string, op Operation) Binding {
	b := allow(t, pt, name, principal, op)
	b.Permission = PermissionDeny
	return b
}

func TestAuthorize(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	onHost := allow(ResourceTopic, PatternLiteral, "h", alice, OpRead)
	onHost.Host = "10.0.0.1"
	acls := NewSet([]Binding{
		allow(ResourceTopic, PatternPrefixed, "orders-", alice, OpWrite),
		deny(ResourceTopic, PatternLiteral, "orders-secret", alice, OpWrite),
		allow(ResourceTopic, PatternLiteral, "public", WildcardPrincipal, OpRead),
		allow(ResourceTopic, PatternLiteral, "*", bob, OpDescribe),
		allow(ResourceGroup, PatternLiteral, "g1", alice, OpRead),
		allow(ResourceTopic, PatternLiteral, "cfg", alice, OpAlterConfigs),
		allow(ResourceTopic, PatternLiteral, "all", alice, OpAll),
		deny(ResourceTopic, PatternLiteral, "all", alice, OpRead),
		deny(ResourceTopic, PatternLiteral, "dr", alice, OpRead),
		allow(ResourceTopic, PatternLiteral, "dr", alice, OpDescribe),
		onHost,
		allow(ResourceCluster, PatternLiteral, ClusterName, alice, OpIdempotentWrite),
	})
	a := New("User:admin; User:CN=broker,O=x", false)
	cases := []struct {
		principal, host string
		t               ResourceType
		name            string
		op              Operation
		want            bool
	}{
		{alice, "1.2.3.4", ResourceTopic, "orders-1", OpWrite, true},
		{alice, "1.2.3.4", ResourceTopic, "orders-1", OpDescribe, true}, // WRITE implies DESCRIBE
		{alice, "1.2.3.4", ResourceTopic, "orders-1", OpRead, false},
		{alice, "1.2.3.4", ResourceTopic, "orders", OpWrite, false},          // shorter than the prefix
		{alice, "1.2.3.4", ResourceTopic, "orders-secret", OpWrite, false},   // DENY wins
		{alice, "1.2.3.4", ResourceTopic, "orders-secret", OpDescribe, true}, // a DENY of WRITE does not deny DESCRIBE
		{bob, "1.2.3.4", ResourceTopic, "orders-1", OpWrite, false},
		{bob, "1.2.3.4", ResourceTopic, "anything", OpDescribe, true}, // literal wildcard
		{bob, "1.2.3.4", ResourceTopic, "anything", OpRead, false},
		{"User:carol", "1.2.3.4", ResourceTopic, "public", OpRead, true}, // User:*
		{"User:carol", "1.2.3.4", ResourceTopic, "public", OpWrite, false},
		{alice, "1.2.3.4", ResourceGroup, "g1", OpRead, true},
		{alice, "1.2.3.4", ResourceGroup, "g1", OpDescribe, true},
		{alice, "1.2.3.4", ResourceGroup, "g2", OpRead, false},
		{alice, "1.2.3.4", ResourceTopic, "cfg", OpDescribeConfigs, true}, // ALTER_CONFIGS implies DESCRIBE_CONFIGS
		{alice, "1.2.3.4", ResourceTopic, "cfg", OpDescribe, false},
		{alice, "1.2.3.4", ResourceTopic, "all", OpWrite, true}, // ALL
		{alice, "1.2.3.4", ResourceTopic, "all", OpRead, false}, // DENY READ beats ALLOW ALL
		{alice, "1.2.3.4", ResourceTopic, "dr", OpDescribe, true},
		{alice, "1.2.3.4", ResourceTopic, "h", OpRead, false}, // host
		{alice, "10.0.0.1", ResourceTopic, "h", OpRead, true},
		{"User:admin", "1.2.3.4", ResourceTopic, "payments", OpWrite, true}, // super user
		{"User:CN=broker,O=x", "1.2.3.4", ResourceCluster, ClusterName, OpClusterAction, true},
		{alice, "1.2.3.4", ResourceCluster, ClusterName, OpIdempotentWrite, true},
		{alice, "1.2.3.4", ResourceCluster, ClusterName, OpClusterAction, false},
		{alice, "1.2.3.4", ResourceTopic, "payments", OpWrite, false}, // no ACL: denied by default
	}
	for _, c := range cases {
		if got := a.Authorize(acls, c.principal, c.host, c.t, c.name, c.op); got != c.want {
			t.Errorf("%s from %s %s on %s %q: got %v, want %v", c.principal, c.host, c.op, c.t, c.name, got, c.want)
		}
	}
}

func TestAllowEveryoneIfNoACLFound(t *testing.T) {
	acls := NewSet([]Binding{allow(ResourceTopic, PatternLiteral, "owned", "User:alice", OpRead)})
	open := New("", true)
	if !open.Authorize(acls, "User:bob", "h", ResourceTopic, "free", OpWrite) {
		t.Error("no ACL on the topic: want allowed with allow.everyone.if.no.acl.found=true")
	}
	if open.Authorize(acls, "User:bob", "h", ResourceTopic, "owned", OpRead) {
		t.Error("an ACL for another user exists: want denied")
	}
	if New("", false).Authorize(acls, "User:bob", "h", ResourceTopic, "free", OpWrite) {
		t.Error("default: want denied")
	}
	if New("", true).Authorize(nil, "User:bob", "h", ResourceGroup, "g", OpRead) != true {
		t.Error("empty set with allow.everyone: want allowed")
	}
}

func TestAuthorizeAny(t *testing.T) {
	a := New("User:admin", false)
	cases := []struct {
		acls []Binding
		want bool
	}{
		{nil, false},
		{[]Binding{allow(ResourceTopic, PatternLiteral, "t", "User:alice", OpWrite)}, true},
		{[]Binding{allow(ResourceTopic, PatternLiteral, "t", "User:alice", OpRead)}, false},
		{[]Binding{allow(ResourceTopic, PatternLiteral, "t", "User:alice", OpWrite), deny(ResourceTopic, PatternLiteral, "t", "User:alice", OpWrite)}, false},
		{[]Binding{allow(ResourceTopic, PatternPrefixed, "ab", "User:alice", OpWrite), deny(ResourceTopic, PatternPrefixed, "a", "User:alice", OpAll)}, false},
		{[]Binding{allow(ResourceTopic, PatternPrefixed, "ab", "User:alice", OpWrite), deny(ResourceTopic, PatternPrefixed, "abc", "User:alice", OpAll)}, true},
		{[]Binding{allow(ResourceTopic, PatternLiteral, "t", "User:*", OpAll), deny(ResourceTopic, PatternLiteral, "*", "User:alice", OpWrite)}, false},
		{[]Binding{allow(ResourceGroup, PatternLiteral, "t", "User:alice", OpWrite)}, false},
	}
	for i, c := range cases {
		if got := a.AuthorizeAny(NewSet(c.acls), "User:alice", "h", ResourceTopic, OpWrite); got != c.want {
			t.Errorf("case %d: got %v, want %v", i, got, c.want)
		}
	}
	if !a.AuthorizeAny(nil, "User:admin", "h", ResourceTopic, OpWrite) {
		t.Error("super user: want allowed")
	}
}

func TestValidateBinding(t *testing.T) {
	ok := allow(ResourceTopic, PatternLiteral, "t", "User:alice", OpRead)
	if err := ValidateBinding(ok); err != nil {
		t.Fatalf("valid binding: %v", err)
	}
	bad := []func(b *Binding){
		func(b *Binding) { b.ResourceType = ResourceAny },
		func(b *Binding) { b.ResourceType = ResourceUnknown },
		func(b *Binding) { b.ResourceType = 9 },
		func(b *Binding) { b.PatternType = PatternMatch },
		func(b *Binding) { b.PatternType = PatternAny },
		func(b *Binding) { b.Operation = OpAny },
		func(b *Binding) { b.Operation = 15 },
		func(b *Binding) { b.Permission = PermissionAny },
		func(b *Binding) { b.ResourceName = "" },
		func(b *Binding) { b.Principal = "alice" },
		func(b *Binding) { b.Principal = "User:" },
		func(b *Binding) { b.Host = "" },
		func(b *Binding) { b.ResourceType, b.ResourceName = ResourceCluster, "other" },
		func(b *Binding) {
			b.ResourceType, b.ResourceName, b.PatternType = ResourceCluster, ClusterName, PatternPrefixed
		},
	}
	for i, f := range bad {
		b := ok
		f(&b)
		if err := ValidateBinding(b); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("case %d %v: got %v, want INVALID_REQUEST", i, b, err)
		}
	}
	c := ok
	c.ResourceType, c.ResourceName = ResourceCluster, ClusterName
	if err := ValidateBinding(c); err != nil {
		t.Errorf("cluster binding: %v", err)
	}
}

func str(s string) *string { return &s }

func TestFilterMatches(t *testing.T) {
	lit := allow(ResourceTopic, PatternLiteral, "orders-1", "User:alice", OpWrite)
	wild := allow(ResourceTopic, PatternLiteral, "*", "User:alice", OpWrite)
	pre := allow(ResourceTopic, PatternPrefixed, "orders-", "User:alice", OpWrite)
	other := allow(ResourceTopic, PatternPrefixed, "pay", "User:alice", OpWrite)
	all := []Binding{lit, wild, pre, other}
	any := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	cases := []struct {
		f    Filter
		want []Binding
	}{
		{any, all},
		{Filter{ResourceType: ResourceTopic, ResourceName: str("orders-1"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, []Binding{lit, wild, pre}},
		{Filter{ResourceType: ResourceTopic, ResourceName: str("orders-1"), PatternType: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, []Binding{lit}},
		{Filter{ResourceType: ResourceTopic, ResourceName: str("orders-"), PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, []Binding{pre}},
		{Filter{ResourceType: ResourceTopic, PatternType: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}, []Binding{pre, other}},
		{Filter{ResourceType: ResourceGroup, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, nil},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: str("User:bob"), Operation: OpAny, Permission: PermissionAny}, nil},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpRead, Permission: PermissionAny}, nil},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionDeny}, nil},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Host: str("*"), Operation: OpWrite, Permission: PermissionAllow}, all},
	}
	for i, c := range cases {
		var got []Binding
		for _, b := range all {
			if c.f.Matches(b) {
				got = append(got, b)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("case %d: got %v, want %v", i, got, c.want)
			continue
		}
		for j := range got {
			if got[j] != c.want[j] {
				t.Errorf("case %d: got %v, want %v", i, got, c.want)
			}
		}
	}
	if err := ValidateFilter(any); err != nil {
		t.Errorf("any filter: %v", err)
	}
	for _, f := range []Filter{{}, {ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny}, {ResourceType: 8, PatternType: 1, Operation: 1, Permission: 1}} {
		if err := ValidateFilter(f); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("filter %+v: got %v, want INVALID_REQUEST", f, err)
		}
	}
}

func TestSetWithWithoutJSON(t *testing.T) {
	a := allow(ResourceTopic, PatternLiteral, "a", "User:x", OpRead)
	b := deny(ResourceGroup, PatternPrefixed, "g", "User:y", OpAll)
	s := (*Set)(nil).With(a, b, a)
	if s.Len() != 2 || !s.Contains(a) || !s.Contains(b) {
		t.Fatalf("With: %v", s.Bindings())
	}
	s2 := s.Without(a)
	if s2.Len() != 1 || s2.Contains(a) || !s.Contains(a) {
		t.Fatalf("Without changed the original or kept a: %v %v", s.Bindings(), s2.Bindings())
	}
	data, err := json.Marshal(struct{ Acls *Set }{s})
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ Acls *Set }
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Acls.Len() != 2 || !back.Acls.Contains(b) || !strings.Contains(string(data), `"resourceName":"g"`) {
		t.Fatalf("round trip: %s -> %v", data, back.Acls.Bindings())
	}
	if !New("", false).Authorize(back.Acls, "User:x", "h", ResourceTopic, "a", OpRead) {
		t.Error("the decoded set is not indexed")
	}
}
