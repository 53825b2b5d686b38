// Package acl is sluice's access control: ACL bindings as Kafka defines
// them (org.apache.kafka.common.acl.AclBinding, KIP-290 prefixed
// patterns), the filters of DescribeAcls and DeleteAcls
// (AclBindingFilter), the checks the controller makes before storing a
// binding (AclControlManager.validateNewAcl) and the decision of Kafka's
// StandardAuthorizer (authorizer.go). It is pure: the bindings come from
// the metadata image, the principal and host from the connection.
package acl

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ResourceType is Kafka's org.apache.kafka.common.resource.ResourceType
// code.
type ResourceType int8

// Resource types (Kafka's codes).
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// PatternType is Kafka's PatternType code (KIP-290).
type PatternType int8

// Pattern types (Kafka's codes). Any and Match are for filters only.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's AclOperation code.
type Operation int8

// Operations (Kafka's codes). Any is for filters only.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is Kafka's AclPermissionType code.
type Permission int8

// Permissions (Kafka's codes). Any is for filters only.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcards: the resource name matching every resource of its type
// (ResourcePattern.WILDCARD_RESOURCE), the principal matching every user
// (Acl.WILDCARD_PRINCIPAL_STRING) and the host matching every host.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
	// ClusterName is the only name of the cluster resource
	// (Resource.CLUSTER_NAME).
	ClusterName = "kafka-cluster"
)

// Binding is one ACL (Kafka's AclBinding: a ResourcePattern and an
// AccessControlEntry).
type Binding struct {
	ResourceType ResourceType `json:"resourceType"`
	ResourceName string       `json:"resourceName"`
	PatternType  PatternType  `json:"patternType"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

// String renders b as kafka-acls.sh lists it.
func (b Binding) String() string {
	return fmt.Sprintf("(resourceType=%s, name=%s, patternType=%s, principal=%s, host=%s, operation=%s, permissionType=%s)",
		b.ResourceType, b.ResourceName, b.PatternType, b.Principal, b.Host, b.Operation, b.Permission)
}

// Filter selects bindings (Kafka's AclBindingFilter): a nil name,
// principal or host, and the Any codes, match everything; PatternMatch
// matches the literal name, the literal wildcard and every prefixed
// pattern the name starts with.
type Filter struct {
	ResourceType ResourceType `json:"resourceType"`
	ResourceName *string      `json:"resourceName,omitempty"`
	PatternType  PatternType  `json:"patternType"`
	Principal    *string      `json:"principal,omitempty"`
	Host         *string      `json:"host,omitempty"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", kerr.InvalidRequest, fmt.Sprintf(format, args...))
}

// ValidateBinding applies the checks Kafka makes before storing an ACL
// (AclControlManager.validateNewAcl, and AclApis' cluster-name and empty
// name checks): a concrete resource type, a LITERAL or PREFIXED pattern,
// a non-empty name (kafka-cluster for the cluster), a concrete operation
// and permission, a principal of the form Type:name, and a host. Its
// errors are INVALID_REQUEST.
func ValidateBinding(b Binding) error {
	switch b.ResourceType {
	case ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID, ResourceDelegationToken, ResourceUser:
	default:
		return invalid("invalid resourceType %s", b.ResourceType)
	}
	switch b.PatternType {
	case PatternLiteral, PatternPrefixed:
	default:
		return invalid("invalid patternType %s", b.PatternType)
	}
	if b.Operation <= OpAny || b.Operation > OpDescribeTokens {
		return invalid("invalid operation %s", b.Operation)
	}
	if b.Permission != PermissionAllow && b.Permission != PermissionDeny {
		return invalid("invalid permissionType %s", b.Permission)
	}
	if b.ResourceName == "" {
		return invalid("resource name should not be empty")
	}
	if b.ResourceType == ResourceCluster && (b.ResourceName != ClusterName || b.PatternType != PatternLiteral) {
		return invalid("the only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if typ, name, ok := strings.Cut(b.Principal, ":"); !ok || typ == "" || name == "" {
		return invalid("invalid principal %q: expected Type:name, e.g. User:alice", b.Principal)
	}
	if b.Host == "" {
		return invalid("invalid null host")
	}
	return nil
}

// ValidateFilter checks a DescribeAcls or DeleteAcls filter: no field may
// be UNKNOWN (AclBindingFilter.findIndefiniteField). Its errors are
// INVALID_REQUEST.
func ValidateFilter(f Filter) error {
	switch {
	case f.ResourceType <= ResourceUnknown || f.ResourceType > ResourceUser:
		return invalid("invalid resourceType %s", f.ResourceType)
	case f.PatternType <= PatternUnknown || f.PatternType > PatternPrefixed:
		return invalid("invalid patternType %s", f.PatternType)
	case f.Operation <= OpUnknown || f.Operation > OpDescribeTokens:
		return invalid("invalid operation %s", f.Operation)
	case f.Permission <= PermissionUnknown || f.Permission > PermissionAllow:
		return invalid("invalid permissionType %s", f.Permission)
	}
	return nil
}

// Matches reports whether f selects b (AclBindingFilter.matches).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

// matchesPattern is ResourcePatternFilter.matches.
func (f Filter) matchesPattern(b Binding) bool {
	switch f.PatternType {
	case PatternAny:
		return f.ResourceName == nil || *f.ResourceName == b.ResourceName
	case PatternMatch:
		if f.ResourceName == nil {
			return true
		}
		name := *f.ResourceName
		switch b.PatternType {
		case PatternLiteral:
			return b.ResourceName == name || b.ResourceName == WildcardResource
		case PatternPrefixed:
			return strings.HasPrefix(name, b.ResourceName)
		}
		return false
	default:
		return f.PatternType == b.PatternType && (f.ResourceName == nil || *f.ResourceName == b.ResourceName)
	}
}

// String returns Kafka's name of the resource type.
func (t ResourceType) String() string {
	return name(int8(t), []string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"})
}

// String returns Kafka's name of the pattern type.
func (p PatternType) String() string {
	return name(int8(p), []string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"})
}

// String returns Kafka's name of the operation.
func (o Operation) String() string {
	return name(int8(o), []string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
		"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"})
}

// String returns Kafka's name of the permission.
func (p Permission) String() string {
	return name(int8(p), []string{"UNKNOWN", "ANY", "DENY", "ALLOW"})
}

func name(c int8, names []string) string {
	if c >= 0 && int(c) < len(names) {
		return names[c]
	}
	return fmt.Sprintf("UNKNOWN(%d)", c)
}
