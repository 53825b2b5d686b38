package handler

// InitProducerId, versions 0-4 (v2: flexible; v3: the producer's current
// id and epoch, KIP-360; v4: PRODUCER_FENCED, KIP-588).
//
// Idempotent producers (no transactional id): a request without a producer
// id gets a new id (allocated durably from the metadata) at epoch 0. A
// request carrying its current id and epoch (v3+, KIP-360) gets the epoch
// bumped, which resets sequence numbers; at the epoch limit a new id is
// handed out instead.
//
// Transactional producers (Kafka's handleInitProducerIdRequest): WRITE on
// the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then
// the transaction coordinator (internal/txn) gives a new id, or bumps the
// epoch and so fences the previous instance; an ongoing transaction is
// aborted first and CONCURRENT_TRANSACTIONS answered until that is done;
// transaction.timeout.ms above transaction.max.timeout.ms is
// INVALID_TRANSACTION_TIMEOUT; v0-v3 get INVALID_PRODUCER_EPOCH for a
// fenced producer.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/txn"
)

func (h *Handlers) initProducerID(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		return h.initTransactionalProducerID(r, req, resp)
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

// initTransactionalProducerID serves InitProducerId for a transactional id.
func (h *Handlers) initTransactionalProducerID(r *protocol.Request, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) protocol.Reply {
	id := *req.TransactionalID
	if !h.allowedTxnID(r, id, acl.OpWrite) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return protocol.Reply{Resp: resp}
	}
	pid, epoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		pid, epoch = req.ProducerID, req.ProducerEpoch
	}
	res := h.txns.InitProducerID(id, req.TransactionTimeoutMillis, pid, epoch)
	return txnReply(res, func(ir txn.InitResult) kmsg.Response {
		resp.ErrorCode = fencedCode(ir.Err, req.Version, 4)
		resp.ProducerID, resp.ProducerEpoch = ir.ProducerID, ir.Epoch
		return resp
	})
}
