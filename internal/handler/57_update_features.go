package handler

// UpdateFeatures, versions 0-2 (KIP-584; v1 ValidateOnly and UpgradeType,
// KIP-778; v2 drops the per-feature results; Kafka forwards it to the
// controller, FeatureControlManager): finalizes feature levels, all of a
// request or none. The features whose level a cluster can change are
// kraft.version (0: static quorum, 1: dynamic voters, KIP-853) and
// group.version (1: KIP-848 consumer groups served, 0: not);
// transaction.version is fixed by the sluice.transaction.version setting
// (docs/transactions.md). A level moves only when every registered broker
// supports it (INVALID_UPDATE_VERSION naming those that do not); a
// downgrade needs AllowDowngrade (v0) or UpgradeType 2/3 (v1+), and
// kraft.version cannot go down. Needs ALTER on the cluster. The
// single-node store (no --voters) has no quorum to change:
// INVALID_UPDATE_VERSION for kraft.version 1.
//
// The finalized levels are in ApiVersions (FinalizedFeatures, with the
// metadata offset as their epoch), which is what DescribeFeatures reads.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) updateFeatures(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	authorized := h.allowedCluster(r, acl.OpAlter)
	fc, ok := h.b.Controller().(metadata.FeatureController)
	var updates []metadata.FeatureUpdate
	for _, u := range req.FeatureUpdates {
		down := u.AllowDowngrade
		if req.Version >= 1 {
			down = u.UpgradeType == 2 || u.UpgradeType == 3 // SAFE_DOWNGRADE, UNSAFE_DOWNGRADE
		}
		updates = append(updates, metadata.FeatureUpdate{Name: u.Feature, Level: u.MaxVersionLevel, Downgrade: down})
	}
	return protocol.Reply{Await: func() kmsg.Response {
		results := map[string]error{}
		var topErr error
		switch {
		case !authorized:
			topErr = kerr.ClusterAuthorizationFailed
		case !ok:
			for _, u := range updates {
				if u.Level != h.b.Image().FeatureLevel(u.Name) {
					results[u.Name] = errors.New("INVALID_UPDATE_VERSION: a single-node cluster (no --voters) has no quorum to change")
				}
			}
		default:
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout(req.TimeoutMillis))
			results, topErr = fc.UpdateFeatures(ctx, updates, req.Version >= 1 && req.ValidateOnly)
			cancel()
		}
		if topErr != nil {
			resp.ErrorCode, resp.ErrorMessage = code(topErr), message(topErr)
		}
		for _, u := range updates {
			rr := kmsg.NewUpdateFeaturesResponseResult()
			rr.Feature = u.Name
			if err := results[u.Name]; err != nil {
				rr.ErrorCode, rr.ErrorMessage = kerr.InvalidUpdateVersion.Code, kmsg.StringPtr(err.Error())
				if c := code(err); c != kerr.UnknownServerError.Code {
					rr.ErrorCode = c
				}
				if req.Version >= 2 && resp.ErrorCode == 0 {
					// v2 has no per-feature results: the first error is
					// the request's.
					resp.ErrorCode, resp.ErrorMessage = rr.ErrorCode, rr.ErrorMessage
				}
			} else if topErr != nil {
				rr.ErrorCode, rr.ErrorMessage = resp.ErrorCode, resp.ErrorMessage
			}
			if req.Version < 2 {
				resp.Results = append(resp.Results, rr)
			}
		}
		return resp
	}}
}
