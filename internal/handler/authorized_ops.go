package handler

// Authorized operations (KIP-430): Metadata (v8+), DescribeCluster and
// DescribeGroups (v3+) report, when the request asks, which operations
// the principal may perform on each topic, on the cluster or on each
// group, as a bit field whose bit i is the operation with Kafka code i.
// Only the operations Kafka lists for the resource type are reported
// (AclEntry.supportedOperations). Not asked, the field keeps Kafka's
// "not requested" value, Integer.MIN_VALUE. Without an authorizer every
// supported operation is allowed.

import (
	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

// The operations each resource type supports.
var (
	topicOps   = []acl.Operation{acl.OpRead, acl.OpWrite, acl.OpCreate, acl.OpDescribe, acl.OpDelete, acl.OpAlter, acl.OpDescribeConfigs, acl.OpAlterConfigs}
	clusterOps = []acl.Operation{acl.OpCreate, acl.OpClusterAction, acl.OpDescribeConfigs, acl.OpAlterConfigs, acl.OpIdempotentWrite, acl.OpAlter, acl.OpDescribe}
	groupOps   = []acl.Operation{acl.OpRead, acl.OpDescribe, acl.OpDelete}
)

// authorizedOps is the KIP-430 bit field of ops the request's principal
// may perform on resource (t, name).
func (h *Handlers) authorizedOps(r *protocol.Request, t acl.ResourceType, name string, ops []acl.Operation) int32 {
	var bits int32
	for _, op := range ops {
		if h.allowed(r, t, name, op) {
			bits |= 1 << op
		}
	}
	return bits
}
