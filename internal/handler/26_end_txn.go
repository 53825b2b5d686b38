package handler

// EndTxn, versions 0-5 (v2: PRODUCER_FENCED, KIP-588; v3: flexible; v4:
// the TRANSACTION_ABORTABLE code of KIP-890, never sent here; v5:
// transaction version 2, KIP-890 part 2).
//
// Kafka's handleEndTxnRequest: WRITE on the transactional id (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then the coordinator writes
// PrepareCommit or PrepareAbort to __transaction_state and answers once
// that is durable; the markers go to the partitions afterwards
// (TransactionCoordinator.handleEndTransaction). While the transaction is
// in transition (a change being written, or its markers) any EndTxn
// answers CONCURRENT_TRANSACTIONS; a retry of an end already done answers
// NONE; ending the other way, or a transaction with no partitions,
// INVALID_TXN_STATE. With v5 every EndTxn bumps the producer
// epoch, and the response carries the producer id and epoch of the next
// transaction (a new producer id when the epoch is exhausted). v0-v1 get
// INVALID_PRODUCER_EPOCH for a fenced producer.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/txn"
)

func (t *txnAPI) endTxn(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.EndTxnRequest)
	build := func(res txn.EndResult) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = fencedCode(res.Err, req.Version, 2)
		resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.Epoch
		return resp
	}
	if !t.h.allowedTxnID(r, req.TransactionalID, acl.OpWrite) {
		return protocol.Reply{Resp: build(txn.EndResult{Err: kerr.TransactionalIDAuthorizationFailed, ProducerID: -1, Epoch: -1})}
	}
	tv := int16(0)
	if req.Version >= 5 {
		tv = 2
	}
	return txnReply(t.c.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, tv), build)
}
