package handler

// AddPartitionsToTxn, versions 0-5 (v2: PRODUCER_FENCED, KIP-588; v3:
// flexible; v4: the batched broker form with VerifyOnly, KIP-890 part 1;
// v5: the TRANSACTION_ABORTABLE code, never sent here).
//
// v0-v3 come from producers (Kafka's handleAddPartitionsToTxnRequest):
// WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// for every partition; then WRITE on each topic (TOPIC_AUTHORIZATION_FAILED)
// and each partition must exist (UNKNOWN_TOPIC_OR_PARTITION); if any of
// those fails nothing is added and the other partitions get
// OPERATION_NOT_ATTEMPTED. Otherwise the partitions join the transaction
// (beginning it) once the coordinator's record is durable; the
// coordinator's error (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
// CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// ...) applies to every partition. v0-v1 get INVALID_PRODUCER_EPOCH for a
// fenced producer.
//
// v4+ come from partition leaders and need CLUSTER_ACTION on the cluster
// (else CLUSTER_AUTHORIZATION_FAILED at the top): each transaction of the
// batch is verified (VerifyOnly: a partition not in the ongoing
// transaction gets INVALID_TXN_STATE, nothing is added) or added.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/txn"
)

// maxTxnBatch bounds the transactions of one v4+ request.
const maxTxnBatch = 10000

// txnTopic is one topic of a request, in either form.
type txnTopic struct {
	topic      string
	partitions []int32
}

func (t *txnAPI) addPartitionsToTxn(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		return t.addPartitionsBatch(r, req)
	}
	topics := make([]txnTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		topics = append(topics, txnTopic{rt.Topic, rt.Partitions})
	}
	build := func(codes map[txn.Partition]int16) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		resp.Topics = txnResponseTopics(topics, codes)
		return resp
	}
	if !t.h.allowedTxnID(r, req.TransactionalID, acl.OpWrite) {
		return protocol.Reply{Resp: build(allCodes(topics, kerr.TransactionalIDAuthorizationFailed.Code))}
	}
	parts, codes := t.checkTopics(r, topics, true)
	if codes != nil {
		return protocol.Reply{Resp: build(codes)}
	}
	res := t.c.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts)
	return txnReply(res, func(err *kerr.Error) kmsg.Response {
		return build(allCodes(topics, fencedCode(err, req.Version, 2)))
	})
}

// checkTopics checks topic authorization (when authz) and existence; on
// failure it returns the codes to answer with (the failures, and
// OPERATION_NOT_ATTEMPTED for the rest), else the partitions.
func (t *txnAPI) checkTopics(r *protocol.Request, topics []txnTopic, authz bool) ([]txn.Partition, map[txn.Partition]int16) {
	img := t.h.b.Image()
	var parts []txn.Partition
	codes := map[txn.Partition]int16{}
	failed := false
	for _, tt := range topics {
		mt := img.Topics[tt.topic]
		for _, p := range tt.partitions {
			tp := txn.Partition{Topic: tt.topic, Partition: p}
			switch {
			case authz && !t.h.allowedTopic(r, tt.topic, acl.OpWrite):
				codes[tp], failed = kerr.TopicAuthorizationFailed.Code, true
			case mt == nil || p < 0 || int(p) >= len(mt.Partitions):
				codes[tp], failed = kerr.UnknownTopicOrPartition.Code, true
			default:
				parts = append(parts, tp)
			}
		}
	}
	if !failed {
		return parts, nil
	}
	for _, tp := range parts {
		codes[tp] = kerr.OperationNotAttempted.Code
	}
	return nil, codes
}

// allCodes gives every partition of topics the same code.
func allCodes(topics []txnTopic, code int16) map[txn.Partition]int16 {
	out := map[txn.Partition]int16{}
	for _, tt := range topics {
		for _, p := range tt.partitions {
			out[txn.Partition{Topic: tt.topic, Partition: p}] = code
		}
	}
	return out
}

func txnResponseTopics(topics []txnTopic, codes map[txn.Partition]int16) []kmsg.AddPartitionsToTxnResponseTopic {
	out := make([]kmsg.AddPartitionsToTxnResponseTopic, 0, len(topics))
	for _, tt := range topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = tt.topic
		for _, p := range tt.partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, codes[txn.Partition{Topic: tt.topic, Partition: p}]
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

// addPartitionsBatch serves v4+, the partition leaders' form.
func (t *txnAPI) addPartitionsBatch(r *protocol.Request, req *kmsg.AddPartitionsToTxnRequest) protocol.Reply {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	switch {
	case !t.h.allowedCluster(r, acl.OpClusterAction):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return protocol.Reply{Resp: resp}
	case len(req.Transactions) > maxTxnBatch:
		resp.ErrorCode = kerr.InvalidRequest.Code
		return protocol.Reply{Resp: resp}
	}
	type pending struct {
		i      int
		topics []txnTopic
		res    txn.Result[*kerr.Error]
	}
	var waits []pending
	for i, tr := range req.Transactions {
		topics := make([]txnTopic, 0, len(tr.Topics))
		for _, rt := range tr.Topics {
			topics = append(topics, txnTopic{rt.Topic, rt.Partitions})
		}
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tr.TransactionalID
		parts, codes := t.checkTopics(r, topics, false)
		switch {
		case codes != nil:
		case tr.VerifyOnly:
			codes = map[txn.Partition]int16{}
			for tp, err := range t.c.VerifyPartitions(tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, parts) {
				if err != nil {
					codes[tp] = err.Code
				}
			}
		default:
			waits = append(waits, pending{i, topics,
				t.c.AddPartitions(tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, parts)})
		}
		rtx.Topics = txnBatchTopics(topics, codes)
		resp.Transactions = append(resp.Transactions, rtx)
	}
	finish := func() kmsg.Response {
		for _, w := range waits {
			code := int16(0)
			if err := w.res.Get(); err != nil {
				code = err.Code
			}
			resp.Transactions[w.i].Topics = txnBatchTopics(w.topics, allCodes(w.topics, code))
		}
		return resp
	}
	if len(waits) == 0 {
		return protocol.Reply{Resp: resp}
	}
	return protocol.Reply{Await: finish}
}

func txnBatchTopics(topics []txnTopic, codes map[txn.Partition]int16) []kmsg.AddPartitionsToTxnResponseTransactionTopic {
	out := make([]kmsg.AddPartitionsToTxnResponseTransactionTopic, 0, len(topics))
	for _, tt := range topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		rt.Topic = tt.topic
		for _, p := range tt.partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			rp.Partition, rp.ErrorCode = p, codes[txn.Partition{Topic: tt.topic, Partition: p}]
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}
