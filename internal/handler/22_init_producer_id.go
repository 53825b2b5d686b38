package handler

// InitProducerId, versions 0-4, for idempotent producers.
//
// A request without a producer id gets a new id (allocated durably from the
// metadata) at epoch 0. A request carrying its current id and epoch (v3+,
// KIP-360) gets the epoch bumped, which resets sequence numbers; at the
// epoch limit a new id is handed out instead. Transactional ids are not
// served yet (no transaction coordinator): such requests get
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED so the client fails fast instead of
// retrying.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) initProducerID(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return protocol.Reply{Resp: resp}
	}
	// An idempotent producer needs IDEMPOTENT_WRITE on the cluster, or
	// WRITE on some topic (KafkaApis.handleInitProducerIdRequest, KIP-679).
	if !h.allowedCluster(r, acl.OpIdempotentWrite) && !h.allowedAnyTopic(r, acl.OpWrite) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return protocol.Reply{Resp: resp}
	}
	if req.ProducerID >= 0 && req.ProducerEpoch >= 0 && req.ProducerEpoch < math.MaxInt16-1 {
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		return protocol.Reply{Resp: resp}
	}
	id, err := h.b.AllocateProducerID()
	if err != nil {
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return protocol.Reply{Resp: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return protocol.Reply{Resp: resp}
}
