package handler

// TxnOffsetCommit, versions 0-5 (Kafka 4.0's range; v6, with topic ids,
// is later).
//
// A transactional producer's consumed offsets (KIP-98), written to the
// group's partition of __consumer_offsets as offset commit records in one
// transactional batch with the request's producer id and epoch, and
// answered once durable. They stay pending until the transaction's marker
// is replicated there (WriteTxnMarkers' marker hook, registered in
// groups.go, calls group.Coordinator.CompleteTxn): OffsetFetch does not
// return them before, and with RequireStable answers
// UNSTABLE_OFFSET_COMMIT for their partitions.
//
// Authorization as KafkaApis.handleTxnOffsetCommitRequest: WRITE on the
// transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
// READ on the group (else GROUP_AUTHORIZATION_FAILED), READ on each topic
// (else its partitions TOPIC_AUTHORIZATION_FAILED, the rest committed).
// Then, per partition: UNKNOWN_TOPIC_OR_PARTITION; the group's errors
// (INVALID_GROUP_ID, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE while
// loading); v3+ (KIP-447) a given generation, member id or instance id is
// checked against the group (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID); OFFSET_METADATA_TOO_LARGE; INVALID_PRODUCER_EPOCH
// when the partition knows a newer epoch of the producer id. v5 under
// transaction version 2 (KIP-890 part 2) first adds the group's
// __consumer_offsets partition to the transaction with its coordinator
// (the client sent no AddOffsetsToTxn; txn_verify.go); its failures
// answer every partition (txnOffsetAddError).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) txnOffsetCommit(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	fail := func(code int16) protocol.Reply {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return protocol.Reply{Resp: resp}
	}
	switch {
	case !g.h.allowed(r, acl.ResourceTransactionalID, req.TransactionalID, acl.OpWrite):
		return fail(kerr.TransactionalIDAuthorizationFailed.Code)
	case !g.h.allowedGroup(r, req.Group, acl.OpRead):
		return fail(groupDenied)
	}
	var denied []kmsg.TxnOffsetCommitResponseTopic
	var kept []kmsg.TxnOffsetCommitRequestTopic
	for _, t := range req.Topics {
		if g.h.allowedTopic(r, t.Topic, acl.OpRead) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	req.Topics = kept
	if req.Version >= 5 && g.h.txnVersion >= 2 && g.h.txns != nil && len(kept) > 0 {
		// Transaction version 2: the group's __consumer_offsets
		// partition joins the transaction here (KIP-890 part 2), as
		// AddOffsetsToTxn would have.
		op := g.h.txns.OffsetsPartition(req.Group)
		if err := txnOffsetAddError(g.h.addToTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, op.Topic, op.Partition, false)); err != nil {
			reply := fail(err.Code)
			resp := reply.Resp.(*kmsg.TxnOffsetCommitResponse)
			resp.Topics = append(resp.Topics, denied...)
			return reply
		}
	}
	return replyMap(g.c.TxnOffsetCommit(req), func(resp *kmsg.TxnOffsetCommitResponse) *kmsg.TxnOffsetCommitResponse {
		resp.Topics = append(resp.Topics, denied...)
		return resp
	})
}

// txnOffsetAddError maps the error of a TxnOffsetCommit's implicit add to
// what the request answers, as Kafka's
// GroupMetadataManager.maybeConvertOffsetCommitError does the
// verification's: the transaction coordinator's retriable answers stay
// retriable (CONCURRENT_TRANSACTIONS while the producer's previous
// transaction completes, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR),
// any other trouble reaching it is COORDINATOR_NOT_AVAILABLE; a fenced
// producer is INVALID_PRODUCER_EPOCH, and the transaction's own failures
// TRANSACTION_ABORTABLE (v5 is a client of transaction version 2). The
// produce path's NOT_ENOUGH_REPLICAS (txnAppendError) is no
// TxnOffsetCommit error: clients take it as fatal.
func txnOffsetAddError(err *kerr.Error) *kerr.Error {
	switch err {
	case nil, kerr.InvalidProducerIDMapping, kerr.TransactionalIDAuthorizationFailed,
		kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress, kerr.NotCoordinator:
		return err
	case kerr.ProducerFenced, kerr.InvalidProducerEpoch:
		return kerr.InvalidProducerEpoch
	case kerr.InvalidTxnState, kerr.InvalidRequest, kerr.TransactionAbortable:
		return kerr.TransactionAbortable
	}
	return kerr.CoordinatorNotAvailable
}
