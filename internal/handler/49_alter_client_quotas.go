package handler

// AlterClientQuotas, versions 0-1 (KIP-546; v1 is flexible): sets and
// removes the quotas of user, client-id and (user, client-id) entities,
// a null name being the entity's default, committed through the
// controller into the replicated metadata (metadata.QuotaAlterer). Per
// entry, INVALID_REQUEST for an empty entity, an unknown or repeated
// entity type, an empty name, an unknown key, a value that is not
// positive or not an integer for a byte rate (Kafka's
// ClientQuotaControlManager); ip entities (connection_creation_rate) are
// not served and refused likewise. ValidateOnly checks without
// committing. With an authorizer the caller needs ALTER_CONFIGS on the
// cluster (CLUSTER_AUTHORIZATION_FAILED for every entry).

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// maxQuotaOps bounds the ops of one AlterClientQuotas entry (there are
// four keys).
const maxQuotaOps = 16

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// quotaEntityOf builds the entity of an AlterClientQuotas entry.
func quotaEntityOf(parts []kmsg.AlterClientQuotasRequestEntryEntity) (metadata.QuotaEntity, error) {
	var e metadata.QuotaEntity
	for _, p := range parts {
		var n *metadata.QuotaName
		switch p.Type {
		case "user":
			n = &e.User
		case "client-id":
			n = &e.ClientID
		case "ip":
			return e, fmt.Errorf("%w: ip quotas (connection_creation_rate) are not supported", kerr.InvalidRequest)
		default:
			return e, fmt.Errorf("%w: unhandled client quota entity type: %s", kerr.InvalidRequest, p.Type)
		}
		if n.Set {
			return e, fmt.Errorf("%w: duplicate %s component in the entity", kerr.InvalidRequest, p.Type)
		}
		n.Set = true
		if p.Name == nil {
			n.Default = true
		} else {
			n.Name = *p.Name
		}
	}
	return e, metadata.CheckQuotaEntity(e)
}

func (h *Handlers) alterClientQuotas(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	errs := make([]error, len(req.Entries))
	for _, en := range req.Entries {
		res := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range en.Entity {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			res.Entity = append(res.Entity, ent)
		}
		resp.Entries = append(resp.Entries, res)
	}
	finish := func() kmsg.Response {
		for i, e := range errs {
			if e != nil {
				resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = code(e), message(e)
			}
		}
		return resp
	}
	if !h.allowedCluster(r, acl.OpAlterConfigs) {
		for i := range errs {
			errs[i] = fmt.Errorf("%w: ALTER_CONFIGS on the cluster is needed to alter client quotas", kerr.ClusterAuthorizationFailed)
		}
		return protocol.Reply{Resp: finish()}
	}
	if len(req.Entries) > metadata.MaxQuotaEntities {
		for i := range errs {
			errs[i] = fmt.Errorf("%w: at most %d entries", kerr.InvalidRequest, metadata.MaxQuotaEntities)
		}
		return protocol.Reply{Resp: finish()}
	}
	var alts []metadata.QuotaAlteration
	var idx []int // request entry of each alteration
	for i, en := range req.Entries {
		e, err := quotaEntityOf(en.Entity)
		if err == nil && len(en.Ops) > maxQuotaOps {
			err = fmt.Errorf("%w: at most %d ops per entity", kerr.InvalidRequest, maxQuotaOps)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		a := metadata.QuotaAlteration{Entity: e}
		for _, op := range en.Ops {
			a.Ops = append(a.Ops, metadata.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		alts = append(alts, a)
		idx = append(idx, i)
	}
	if len(alts) == 0 {
		return protocol.Reply{Resp: finish()}
	}
	if req.ValidateOnly {
		got, _ := metadata.PlanAlterQuotas(h.b.Image(), alts)
		for j, e := range got {
			errs[idx[j]] = e
		}
		return protocol.Reply{Resp: finish()}
	}
	qa, ok := h.b.Controller().(metadata.QuotaAlterer)
	return protocol.Reply{Await: func() kmsg.Response {
		var got []error
		err := error(kerr.UnsupportedVersion)
		if ok {
			ctx, cancel := context.WithTimeout(context.Background(), aclTimeout)
			defer cancel()
			got, err = qa.AlterClientQuotas(ctx, alts)
		}
		for j := range alts {
			switch {
			case err != nil:
				errs[idx[j]] = err
			case j < len(got):
				errs[idx[j]] = got[j]
			default:
				errs[idx[j]] = errors.New("no result")
			}
		}
		return finish()
	}}
}
