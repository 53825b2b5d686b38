package handler

// Transaction verification on produce (KIP-890 part 1, Kafka's
// AddPartitionsToTxnManager): before a producer's first transactional
// batch of a transaction is appended to a partition, the leader asks the
// transaction coordinator whether the partition is in that producer's
// ongoing transaction, with AddPartitionsToTxn's VerifyOnly form (served
// in process when this node is the coordinator). A Produce delayed past
// the end of its transaction is thereby refused instead of opening a
// transaction that no marker will end (a hanging transaction, which stops
// read_committed consumers at its first offset for good). The partition's
// guard (broker.Partition.BeginVerification) catches a marker that lands
// between the answer and the append. transaction.partition.verification.enable
// turns it off.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/txn"
)

// verifyTimeout bounds one verification round trip.
const verifyTimeout = 5 * time.Second

// verifyTxn verifies that topic-partition is in producer pid's ongoing
// transaction txnID. The error is the one the Produce answers: retriable
// coordinator trouble becomes NOT_ENOUGH_REPLICAS (the producer retries
// the batch), as Kafka's verification does.
func (h *Handlers) verifyTxn(txnID string, pid int64, epoch int16, topic string, partition int32) *kerr.Error {
	node, cerr := h.txns.Coordinator(txnID)
	var err *kerr.Error
	switch {
	case cerr != nil:
		err = cerr
	case node == h.b.NodeID():
		err = h.txns.VerifyPartitions(txnID, pid, epoch, []txn.Partition{{Topic: topic, Partition: partition}})[txn.Partition{Topic: topic, Partition: partition}]
	default:
		err = h.verifyRemote(node, txnID, pid, epoch, topic, partition)
	}
	switch err {
	case nil, kerr.InvalidTxnState, kerr.InvalidProducerIDMapping:
		return err
	case kerr.ProducerFenced, kerr.InvalidProducerEpoch:
		return kerr.InvalidProducerEpoch
	case kerr.TransactionalIDAuthorizationFailed:
		return err
	}
	return kerr.NotEnoughReplicas
}

// verifyRemote sends the verification to the coordinator on node.
func (h *Handlers) verifyRemote(node int32, txnID string, pid int64, epoch int16, topic string, partition int32) *kerr.Error {
	peer, err := h.b.Peer(node, "sluice-txn-verify")
	if err != nil {
		return kerr.CoordinatorNotAvailable
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = txnID, pid, epoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = topic, []int32{partition}
	t.Topics = append(t.Topics, tt)
	req.Transactions = append(req.Transactions, t)
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	kresp, rerr := peer.Request(ctx, req)
	if rerr != nil {
		return kerr.CoordinatorNotAvailable
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error)
	}
	for _, r := range resp.Transactions {
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == topic && rp.Partition == partition {
					if rp.ErrorCode == 0 {
						return nil
					}
					if ke, ok := kerr.ErrorForCode(rp.ErrorCode).(*kerr.Error); ok {
						return ke
					}
					return kerr.UnknownServerError
				}
			}
		}
	}
	return kerr.UnknownServerError
}

// verifyBatch verifies the transaction of records, a transactional batch
// for p, when p has none open for its producer, and returns the guard to
// append it with (0: no verification was needed).
func (h *Handlers) verifyBatch(p *broker.Partition, records []byte, txnID *string) (uint64, error) {
	if txnID == nil || h.txns == nil || !h.b.Config().Bool("transaction.partition.verification.enable", true) {
		return 0, nil
	}
	hdr, err := batch.ParseHeader(records)
	if err != nil || !hdr.IsTransactional() || hdr.ProducerID < 0 || p.TxnOpen(hdr.ProducerID) {
		return 0, nil
	}
	guard := p.BeginVerification(hdr.ProducerID)
	if err := h.verifyTxn(*txnID, hdr.ProducerID, hdr.ProducerEpoch, p.Topic, p.Partition); err != nil {
		return 0, err
	}
	return guard, nil
}
