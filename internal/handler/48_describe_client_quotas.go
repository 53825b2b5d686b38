package handler

// DescribeClientQuotas, versions 0-1 (KIP-546; v1 is flexible): the
// stored quotas a filter matches (metadata.DescribeQuotas, Kafka's
// ClientQuotasImage.describe). A malformed filter is INVALID_REQUEST, an
// unknown entity type UNSUPPORTED_VERSION, both for the whole response.
// With an authorizer the caller needs DESCRIBE_CONFIGS on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// maxQuotaComponents bounds a DescribeClientQuotas filter (there are
// three entity types, each at most once).
const maxQuotaComponents = 3

func (h *Handlers) describeClientQuotas(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !h.allowedCluster(r, acl.OpDescribeConfigs) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("DESCRIBE_CONFIGS on the cluster is needed to describe client quotas")
		return protocol.Reply{Resp: resp}
	}
	if len(req.Components) > maxQuotaComponents {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("too many filter components")
		return protocol.Reply{Resp: resp}
	}
	comps := make([]metadata.QuotaComponent, len(req.Components))
	for i, c := range req.Components {
		comps[i] = metadata.QuotaComponent{Type: c.EntityType, MatchType: int8(c.MatchType), Match: c.Match}
	}
	quotas, err := metadata.DescribeQuotas(h.b.Image(), comps, req.Strict)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		return protocol.Reply{Resp: resp}
	}
	for _, q := range quotas {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		add := func(typ string, n metadata.QuotaName) {
			if !n.Set {
				return
			}
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type = typ
			if !n.Default {
				ent.Name = kmsg.StringPtr(n.Name)
			}
			e.Entity = append(e.Entity, ent)
		}
		add("user", q.Entity.User)
		add("client-id", q.Entity.ClientID)
		for _, k := range sortedKeys(q.Values) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return protocol.Reply{Resp: resp}
}
