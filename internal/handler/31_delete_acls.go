package handler

// DeleteAcls, versions 0-3: each filter (Kafka's AclBindingFilter: ANY
// and MATCH patterns, null name, principal and host match everything)
// removes the stored bindings it matches, committed through the
// controller; the answer lists them per filter, a binding under the first
// filter that matched it. A filter with an UNKNOWN field is
// INVALID_REQUEST. The caller needs ALTER on the cluster
// (CLUSTER_AUTHORIZATION_FAILED per filter); without an authorizer each
// filter is SECURITY_DISABLED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) deleteAcls(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	fail := func(err *kerr.Error, msg string) protocol.Reply {
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = err.Code, kmsg.StringPtr(msg)
			resp.Results = append(resp.Results, res)
		}
		return protocol.Reply{Resp: resp}
	}
	if err, msg := h.aclAPIGate(r, acl.OpAlter, "delete ACLs"); err != nil {
		return fail(err, msg)
	}
	filters := make([]acl.Filter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = acl.Filter{
			ResourceType: acl.ResourceType(f.ResourceType), ResourceName: f.ResourceName,
			PatternType: patternOf(req.Version, f.ResourcePatternType), Principal: f.Principal, Host: f.Host,
			Operation: acl.Operation(f.Operation), Permission: acl.Permission(f.PermissionType),
		}
	}
	aa, ok := h.b.Controller().(metadata.AclAlterer)
	return protocol.Reply{Await: func() kmsg.Response {
		var out []metadata.AclDeletion
		err := error(kerr.UnsupportedVersion)
		if ok {
			ctx, cancel := context.WithTimeout(context.Background(), aclTimeout)
			defer cancel()
			out, err = aa.DeleteAcls(ctx, filters)
		}
		for i := range filters {
			res := kmsg.NewDeleteACLsResponseResult()
			e := err
			if e == nil {
				e = out[i].Err
			}
			if e != nil {
				res.ErrorCode, res.ErrorMessage = code(e), message(e)
				resp.Results = append(resp.Results, res)
				continue
			}
			for _, b := range out[i].Deleted {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
				m.Principal, m.Host = b.Principal, b.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
			resp.Results = append(resp.Results, res)
		}
		return resp
	}}
}
