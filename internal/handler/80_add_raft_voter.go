package handler

// AddRaftVoter, versions 0-1 (KIP-853; kafka-metadata-quorum.sh
// add-controller): adds a node to the metadata quorum. The node must be
// running with a controller listener (`--controller-listen`) and not be in
// --voters (a prospective voter, docs/operations.md); its first listener
// in the request is the address voters reach it on. The active controller
// adds it as a non-voting member, waits until its log has caught up (up to
// TimeoutMillis, default 30 s: REQUEST_TIMED_OUT and no change otherwise),
// then makes it a voter. DUPLICATE_VOTER if it is one already;
// INCONSISTENT_CLUSTER_ID for another cluster's id; the directory id is
// ignored (sluice has none). Needs ALTER on the cluster. A node without
// --voters has no quorum to grow: UNSUPPORTED_VERSION.

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) addRaftVoter(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.AddRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	authorized := h.allowedCluster(r, acl.OpAlter)
	qc, ok := h.b.Controller().(metadata.QuorumController)
	fail := func(err *kerr.Error, msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = err.Code, kmsg.StringPtr(msg)
		return resp
	}
	return protocol.Reply{Await: func() kmsg.Response {
		switch {
		case !authorized:
			return fail(kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed.Message)
		case !ok:
			return fail(kerr.UnsupportedVersion, "this node has no controller quorum (no --voters)")
		case req.ClusterID != nil && *req.ClusterID != "" && *req.ClusterID != h.b.Image().ClusterID:
			return fail(kerr.InconsistentClusterID, "cluster id "+*req.ClusterID+" is not this cluster's")
		case req.VoterID < 0 || len(req.Listeners) == 0 || req.Listeners[0].Host == "" || req.Listeners[0].Port == 0:
			return fail(kerr.InvalidRequest, "AddRaftVoter needs a voter id and a listener (host and port)")
		}
		l := req.Listeners[0]
		addr := net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
		timeout := adminTimeout(req.TimeoutMillis)
		ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
		defer cancel()
		if err := qc.AddVoter(ctx, req.VoterID, addr, timeout); err != nil {
			resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		}
		return resp
	}}
}
