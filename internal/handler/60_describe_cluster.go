package handler

// DescribeCluster, versions 0-1 (KIP-700): cluster id, controller and the
// registered brokers, by their endpoints on the listener the request came
// in on (a broker without it is left out). EndpointType 1 (brokers) is
// the only one served. ClusterAuthorizedOperations when asked (KIP-430,
// authorized_ops.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) describeCluster(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return protocol.Reply{Resp: resp}
	}
	resp.EndpointType = 1
	img := h.b.Image()
	resp.ClusterID = img.ClusterID
	resp.ControllerID = h.b.NodeID()
	for _, id := range img.BrokerIDs() {
		br := img.Brokers[id]
		host, port, ok := endpoint(r, br)
		if !ok {
			continue // not on the listener this request came in on
		}
		sb := kmsg.NewDescribeClusterResponseBroker()
		sb.NodeID, sb.Host, sb.Port = br.ID, host, port
		if br.Rack != "" {
			sb.Rack = kmsg.StringPtr(br.Rack)
		}
		resp.Brokers = append(resp.Brokers, sb)
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = h.authorizedOps(r, acl.ResourceCluster, acl.ClusterName, clusterOps)
	}
	return protocol.Reply{Resp: resp}
}
