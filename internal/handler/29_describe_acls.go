package handler

// DescribeAcls, versions 0-3: the stored bindings one filter matches
// (Kafka's AclBindingFilter), grouped by resource pattern. A filter with
// an UNKNOWN field is INVALID_REQUEST. The caller needs DESCRIBE on the
// cluster (CLUSTER_AUTHORIZATION_FAILED); without an authorizer the answer
// is SECURITY_DISABLED, which tools such as MirrorMaker 2 rely on.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) describeAcls(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(err error) protocol.Reply {
		resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		return protocol.Reply{Resp: resp}
	}
	if err, msg := h.aclAPIGate(r, acl.OpDescribe, "describe ACLs"); err != nil {
		resp.ErrorCode, resp.ErrorMessage = err.Code, kmsg.StringPtr(msg)
		return protocol.Reply{Resp: resp}
	}
	f := acl.Filter{
		ResourceType: acl.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: patternOf(req.Version, req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType),
	}
	if err := acl.ValidateFilter(f); err != nil {
		return fail(err)
	}
	// Matching returns the bindings sorted by resource type, pattern
	// type and name, so each resource's bindings are adjacent.
	for _, b := range h.b.Image().Acls.Matching(f) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != kmsg.ACLResourceType(b.ResourceType) ||
			resp.Resources[n-1].ResourceName != b.ResourceName || resp.Resources[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(b.PatternType) {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			resp.Resources = append(resp.Resources, res)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host = b.Principal, b.Host
		a.Operation, a.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return protocol.Reply{Resp: resp}
}
