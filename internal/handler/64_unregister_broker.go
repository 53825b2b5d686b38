package handler

// UnregisterBroker, version 0 (KIP-631; Kafka's broker forwards it to the
// controller, ControllerApis.handleUnregisterBroker). Needs ALTER on the
// cluster. The controller removes the broker's registration only if the
// broker is fenced or shutting down and no partition lists it as a replica
// (metadata.CheckUnregister): BROKER_ID_NOT_REGISTERED for an unknown id,
// INVALID_REQUEST with a message otherwise. Kafka would also unregister a
// broker still listed as a replica (taking it out of the ISRs); sluice
// asks for a reassignment first. Once committed, Metadata and
// DescribeCluster no longer list the broker and its id may register
// again. The request waits for the controller up to 30 s.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) unregisterBroker(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	un, ok := h.b.Controller().(metadata.BrokerUnregisterer)
	authorized := h.allowedCluster(r, acl.OpAlter) // Kafka: ALTER on the cluster
	return protocol.Reply{Await: func() kmsg.Response {
		var err error
		switch {
		case !authorized:
			err = kerr.ClusterAuthorizationFailed
		case !ok:
			err = kerr.UnsupportedVersion
		default:
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout(0))
			err = un.UnregisterBroker(ctx, req.BrokerID)
			cancel()
		}
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		}
		return resp
	}}
}
