package handler

// AddOffsetsToTxn, versions 0-4 (v2: PRODUCER_FENCED, KIP-588; v3:
// flexible; v4: the TRANSACTION_ABORTABLE code of KIP-890, which this
// coordinator never sends).
//
// Kafka's handleAddOffsetsToTxnRequest: WRITE on the transactional id
// (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (else
// GROUP_AUTHORIZATION_FAILED), then the group's __consumer_offsets
// partition, abs(javaHashCode(group)) % partitions, joins the transaction
// (TransactionCoordinator.handleAddPartitionsToTransaction), so that the
// offsets the producer then commits with TxnOffsetCommit get its markers.
// Errors as AddPartitionsToTxn's; v0-v1 get INVALID_PRODUCER_EPOCH for a
// fenced producer.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (t *txnAPI) addOffsetsToTxn(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	build := func(err *kerr.Error) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = fencedCode(err, req.Version, 2)
		return resp
	}
	switch {
	case !t.h.allowedTxnID(r, req.TransactionalID, acl.OpWrite):
		return protocol.Reply{Resp: build(kerr.TransactionalIDAuthorizationFailed)}
	case !t.h.allowedGroup(r, req.Group, acl.OpRead):
		return protocol.Reply{Resp: build(kerr.GroupAuthorizationFailed)}
	}
	return txnReply(t.c.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group), build)
}
