package handler

// RemoveRaftVoter, version 0 (KIP-853; kafka-metadata-quorum.sh
// remove-controller): removes a voter from the metadata quorum. Refused,
// with nothing changed, when the node is not a voter (VOTER_NOT_FOUND),
// is the last one, or when the voters left that answer and have caught
// up would not be a majority of the new quorum (INVALID_REQUEST: it
// could commit nothing). Removing the active controller moves leadership
// first. The node keeps running as a broker and follows the metadata
// from the new quorum; restart it without it in --voters. The directory
// id is ignored. Needs ALTER on the cluster.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) removeRaftVoter(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.RemoveRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	authorized := h.allowedCluster(r, acl.OpAlter)
	qc, ok := h.b.Controller().(metadata.QuorumController)
	return protocol.Reply{Await: func() kmsg.Response {
		var err error
		switch {
		case !authorized:
			err = kerr.ClusterAuthorizationFailed
		case !ok:
			err = kerr.UnsupportedVersion
		case req.ClusterID != nil && *req.ClusterID != "" && *req.ClusterID != h.b.Image().ClusterID:
			err = kerr.InconsistentClusterID
		default:
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout(0))
			err = qc.RemoveVoter(ctx, req.VoterID)
			cancel()
		}
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		}
		return resp
	}}
}
