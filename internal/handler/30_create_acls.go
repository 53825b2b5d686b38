package handler

// CreateAcls, versions 0-3 (KIP-140; v1 adds the pattern type of KIP-290,
// v2 is flexible, v3 allows the USER resource type): ACL bindings
// committed through the controller into the replicated metadata
// (metadata.AclAlterer). Per binding: INVALID_REQUEST for a resource type,
// pattern type (only LITERAL and PREFIXED are stored), operation or
// permission that is ANY or unknown, an empty name, a cluster name other
// than kafka-cluster, a principal not of the form Type:name, or an empty
// host (Kafka's AclControlManager.validateNewAcl); a binding already
// stored succeeds. The caller needs ALTER on the cluster
// (CLUSTER_AUTHORIZATION_FAILED). Without an authorizer every binding is
// SECURITY_DISABLED, as Kafka answers.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// aclTimeout bounds the controller round trip of CreateAcls and
// DeleteAcls.
const aclTimeout = 30 * time.Second

// noAuthorizer is the message of SECURITY_DISABLED (Kafka's).
const noAuthorizer = "No Authorizer is configured on the broker"

// aclAPIGate is what CreateAcls, DescribeAcls and DeleteAcls check first:
// an authorizer is configured (else SECURITY_DISABLED) and the principal
// may op the cluster. It returns the error and its message, or nil.
func (h *Handlers) aclAPIGate(r *protocol.Request, op acl.Operation, what string) (*kerr.Error, string) {
	switch {
	case h.auth == nil:
		return kerr.SecurityDisabled, noAuthorizer
	case !h.allowedCluster(r, op):
		return kerr.ClusterAuthorizationFailed, op.String() + " on the cluster is needed to " + what
	}
	return nil, ""
}

// patternOf is the pattern type of a request: LITERAL before v1, which
// has no such field.
func patternOf(version int16, p kmsg.ACLResourcePatternType) acl.PatternType {
	if version < 1 {
		return acl.PatternLiteral
	}
	return acl.PatternType(p)
}

func (h *Handlers) createAcls(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	fail := func(err *kerr.Error, msg string) protocol.Reply {
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = err.Code, kmsg.StringPtr(msg)
			resp.Results = append(resp.Results, res)
		}
		return protocol.Reply{Resp: resp}
	}
	if err, msg := h.aclAPIGate(r, acl.OpAlter, "create ACLs"); err != nil {
		return fail(err, msg)
	}
	bindings := make([]acl.Binding, len(req.Creations))
	for i, c := range req.Creations {
		bindings[i] = acl.Binding{
			ResourceType: acl.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: patternOf(req.Version, c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType),
		}
	}
	aa, ok := h.b.Controller().(metadata.AclAlterer)
	return protocol.Reply{Await: func() kmsg.Response {
		errs := make([]error, len(bindings))
		var err error
		if ok {
			ctx, cancel := context.WithTimeout(context.Background(), aclTimeout)
			defer cancel()
			var got []error
			if got, err = aa.CreateAcls(ctx, bindings); err == nil {
				copy(errs, got)
			}
		} else {
			err = kerr.UnsupportedVersion
		}
		for i := range bindings {
			res := kmsg.NewCreateACLsResponseResult()
			e := errs[i]
			if err != nil {
				e = err
			}
			if e != nil {
				res.ErrorCode, res.ErrorMessage = code(e), message(e)
			}
			resp.Results = append(resp.Results, res)
		}
		return resp
	}}
}
