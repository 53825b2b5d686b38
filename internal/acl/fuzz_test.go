package acl

import (
	"strings"
	"testing"
)

// reference is a direct reading of StandardAuthorizer's rules over a
// plain list, without the index, for the fuzz test.
func reference(a *Authorizer, bs []Binding, principal, host string, t ResourceType, name string, op Operation) bool {
	if a.superUsers[principal] {
		return true
	}
	found, allowed := false, false
	for _, b := range bs {
		covers := b.ResourceType == t && ((b.PatternType == PatternLiteral && (b.ResourceName == name || b.ResourceName == "*")) ||
			(b.PatternType == PatternPrefixed && strings.HasPrefix(name, b.ResourceName)))
		if !covers {
			continue
		}
		found = true
		if (b.Principal != principal && b.Principal != "User:*") || (b.Host != "*" && b.Host != host) {
			continue
		}
		implied := b.Operation == OpAll || b.Operation == op
		if b.Permission == PermissionAllow && op == OpDescribe {
			implied = implied || b.Operation == OpRead || b.Operation == OpWrite || b.Operation == OpDelete || b.Operation == OpAlter
		}
		if b.Permission == PermissionAllow && op == OpDescribeConfigs {
			implied = implied || b.Operation == OpAlterConfigs
		}
		if !implied {
			continue
		}
		if b.Permission == PermissionDeny {
			return false
		}
		allowed = true
	}
	return allowed || (!found && a.allowIfNoACL)
}

// FuzzAuthorize checks the indexed matcher against the reference on
// bindings built from the fuzzer's bytes: a few names, principals, hosts,
// operations and both pattern types.
func FuzzAuthorize(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, "orders-1", uint8(4), false)
	f.Add([]byte{9, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8}, "*", uint8(8), true)
	names := []string{"orders-", "orders-1", "*", "o", "", "pay", "orders-10"}
	principals := []string{"User:alice", "User:*", "User:bob", "User:admin"}
	hosts := []string{"*", "10.0.0.1", "10.0.0.2"}
	f.Fuzz(func(t *testing.T, data []byte, name string, opb uint8, allowIfNone bool) {
		var bs []Binding
		for len(data) >= 4 {
			c := data[:4]
			data = data[4:]
			b := Binding{
				ResourceType: ResourceType(2 + c[0]%2),
				ResourceName: names[int(c[1])%len(names)],
				PatternType:  PatternType(3 + (c[1]>>4)%2),
				Principal:    principals[int(c[2])%len(principals)],
				Host:         hosts[int(c[2]>>4)%len(hosts)],
				Operation:    Operation(2 + c[3]%13),
				Permission:   Permission(2 + (c[3]>>4)%2),
			}
			bs = append(bs, b)
		}
		a := New("User:admin", allowIfNone)
		op := Operation(2 + opb%13)
		set := NewSet(bs)
		for _, p := range principals[:3] {
			for _, h := range hosts[1:] {
				for _, rt := range []ResourceType{ResourceTopic, ResourceGroup} {
					got := a.Authorize(set, p, h, rt, name, op)
					if want := reference(a, bs, p, h, rt, name, op); got != want {
						t.Fatalf("%s from %s %s on %s %q with %v: got %v, want %v", p, h, op, rt, name, bs, got, want)
					}
				}
			}
		}
	})
}
