package acl

import (
	"fmt"
	"strings"
)

// Authorizer class names accepted in authorizer.class.name: Kafka's
// KRaft StandardAuthorizer and the ZooKeeper-era AclAuthorizer, whose
// decisions are the same.
const (
	StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	AclAuthorizerClass      = "kafka.security.authorizer.AclAuthorizer"
)

// CheckClass checks an authorizer.class.name value: empty (no
// authorization) or one of the two classes sluice implements.
func CheckClass(v string) error {
	switch v {
	case "", StandardAuthorizerClass, AclAuthorizerClass:
		return nil
	}
	return fmt.Errorf("sluice implements %s (and accepts %s for it) only", StandardAuthorizerClass, AclAuthorizerClass)
}

// Authorizer decides requests as Kafka's StandardAuthorizer does. It holds
// the settings; the bindings are passed with each decision (the image's).
type Authorizer struct {
	superUsers map[string]bool
	// allowIfNoACL is allow.everyone.if.no.acl.found.
	allowIfNoACL bool
}

// New returns an authorizer with super.users (semicolon-separated
// principals, e.g. "User:admin;User:broker") and
// allow.everyone.if.no.acl.found.
func New(superUsers string, allowEveryoneIfNoACL bool) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowIfNoACL: allowEveryoneIfNoACL}
	for _, p := range ParseSuperUsers(superUsers) {
		a.superUsers[p] = true
	}
	return a
}

// ParseSuperUsers splits super.users on ';' (Kafka's separator; the
// principals' names may hold commas, as certificate DNs do).
func ParseSuperUsers(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.superUsers[principal] }

// Authorize reports whether principal, connected from host (an IP
// address), may do op on the resource, given the bindings of acls
// (StandardAuthorizerData.authorize): super users may do anything; a
// matching DENY wins over any ALLOW; a binding matches when its pattern
// covers the resource (literal name, literal "*", or a prefix of the
// name), its principal is the principal or User:*, its host is "*" or
// the host, and its operation is ALL or op, or, for an ALLOW, one that
// implies op (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS
// implies DESCRIBE_CONFIGS). With no binding at all on the resource the
// answer is allow.everyone.if.no.acl.found.
func (a *Authorizer) Authorize(acls *Set, principal, host string, t ResourceType, name string, op Operation) bool {
	if a.superUsers[principal] {
		return true
	}
	found, allow, deny := false, false, false
	acls.forResource(t, name, func(b Binding) {
		found = true
		if !principalMatches(b, principal) || (b.Host != WildcardHost && b.Host != host) {
			return
		}
		if !opMatches(b, op) {
			return
		}
		if b.Permission == PermissionDeny {
			deny = true
		} else if b.Permission == PermissionAllow {
			allow = true
		}
	})
	switch {
	case deny:
		return false
	case allow:
		return true
	}
	return !found && a.allowIfNoACL
}

func principalMatches(b Binding, principal string) bool {
	return b.Principal == principal || b.Principal == WildcardPrincipal
}

// opMatches is StandardAuthorizerData.findResult's operation test:
// implications hold for ALLOW bindings only.
func opMatches(b Binding, op Operation) bool {
	if b.Operation == OpAll || b.Operation == op {
		return true
	}
	if b.Permission != PermissionAllow {
		return false
	}
	switch op {
	case OpDescribe:
		return b.Operation == OpRead || b.Operation == OpWrite || b.Operation == OpDelete || b.Operation == OpAlter
	case OpDescribeConfigs:
		return b.Operation == OpAlterConfigs
	}
	return false
}

// AuthorizeAny reports whether principal may do op on some resource of
// type t (Kafka's Authorizer.authorizeByResourceType, used by
// InitProducerId to accept WRITE on any topic): a super user may; else
// there must be an ALLOW binding for it whose pattern no matching DENY
// covers (a DENY on the literal "*", on the same literal name, or on a
// prefix of the name). allow.everyone.if.no.acl.found does not apply.
func (a *Authorizer) AuthorizeAny(acls *Set, principal, host string, t ResourceType, op Operation) bool {
	if a.superUsers[principal] {
		return true
	}
	if acls == nil {
		return false
	}
	var denyLiteral = map[string]bool{}
	var denyPrefix []string
	var allows []Binding
	for _, b := range acls.list {
		if b.ResourceType != t || !principalMatches(b, principal) || (b.Host != WildcardHost && b.Host != host) {
			continue
		}
		if b.Permission == PermissionDeny && (b.Operation == OpAll || b.Operation == op) {
			if b.PatternType == PatternPrefixed {
				denyPrefix = append(denyPrefix, b.ResourceName)
			} else {
				denyLiteral[b.ResourceName] = true
			}
		} else if b.Permission == PermissionAllow && opMatches(b, op) {
			allows = append(allows, b)
		}
	}
	if denyLiteral[WildcardResource] {
		return false
	}
	for _, b := range allows {
		denied := b.PatternType == PatternLiteral && denyLiteral[b.ResourceName]
		for _, p := range denyPrefix {
			if strings.HasPrefix(b.ResourceName, p) {
				denied = true
			}
		}
		if !denied {
			return true
		}
	}
	return false
}
