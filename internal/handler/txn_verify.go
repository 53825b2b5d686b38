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
//
// Under transaction version 2 (KIP-890 part 2, sluice.transaction.version
// 2, advertised as the finalized transaction.version feature) a client
// sends no AddPartitionsToTxn: a Produce v12+ and a TxnOffsetCommit v5+
// add their partition to the transaction here, the same way but with
// VerifyOnly off, and the transaction's own failures answer
// TRANSACTION_ABORTABLE.

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

// addToTxn verifies (verifyOnly) or adds topic-partition to producer
// pid's ongoing transaction txnID with its coordinator, in process when
// it is this node, else with AddPartitionsToTxn v5 through the
// inter-broker client. The error is the coordinator's.
func (h *Handlers) addToTxn(txnID string, pid int64, epoch int16, topic string, partition int32, verifyOnly bool) *kerr.Error {
	node, err := h.txns.Coordinator(txnID)
	if err != nil {
		return err
	}
	tp := txn.Partition{Topic: topic, Partition: partition}
	if node != h.b.NodeID() {
		return h.addRemote(node, txnID, pid, epoch, topic, partition, verifyOnly)
	}
	if verifyOnly {
		return h.txns.VerifyPartitions(txnID, pid, epoch, []txn.Partition{tp})[tp]
	}
	return h.txns.AddPartitions(txnID, pid, epoch, []txn.Partition{tp}).Get()
}

// txnAppendError maps a verification's or implicit add's error to what
// the request answers (Kafka's AddPartitionsToTxnManager): coordinator
// trouble becomes NOT_ENOUGH_REPLICAS, which producers retry; a fenced
// producer INVALID_PRODUCER_EPOCH; for a client of transaction version 2
// (abortable set) the transaction's own failures TRANSACTION_ABORTABLE.
func txnAppendError(err *kerr.Error, abortable bool) *kerr.Error {
	switch err {
	case nil, kerr.InvalidProducerIDMapping, kerr.TransactionalIDAuthorizationFailed:
		return err
	case kerr.ProducerFenced, kerr.InvalidProducerEpoch:
		return kerr.InvalidProducerEpoch
	case kerr.InvalidTxnState, kerr.InvalidRequest:
		if abortable {
			return kerr.TransactionAbortable
		}
		return kerr.InvalidTxnState
	}
	return kerr.NotEnoughReplicas
}

// addRemote sends the verification or add to the coordinator on node.
func (h *Handlers) addRemote(node int32, txnID string, pid int64, epoch int16, topic string, partition int32, verifyOnly bool) *kerr.Error {
	peer, err := h.b.Peer(node, "sluice-txn-verify")
	if err != nil {
		return kerr.CoordinatorNotAvailable
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 5
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = txnID, pid, epoch, verifyOnly
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
		if ke, ok := kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error); ok {
			return ke
		}
		return kerr.UnknownServerError
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

// verifyBatch checks the transaction of records, a transactional batch
// for p, when p has none open for its producer, and returns the guard to
// append it with (0: no check was made). A Produce v12+ under
// transaction version 2 adds the partition to the transaction (KIP-890
// part 2: the client sent no AddPartitionsToTxn); an older one is
// verified (part 1), if transaction.partition.verification.enable.
func (h *Handlers) verifyBatch(p *broker.Partition, records []byte, txnID *string, version int16) (uint64, error) {
	if txnID == nil || h.txns == nil {
		return 0, nil
	}
	implicit := version >= 12 && h.txnVersion >= 2
	if !implicit && !h.b.Config().Bool("transaction.partition.verification.enable", true) {
		return 0, nil
	}
	hdr, err := batch.ParseHeader(records)
	if err != nil || !hdr.IsTransactional() || hdr.ProducerID < 0 || p.TxnOpen(hdr.ProducerID, hdr.ProducerEpoch) {
		return 0, nil
	}
	abortable := version >= 11
	if implicit {
		// The add may wait for the producer's previous transaction to
		// complete, whose markers land here meanwhile; the guard is
		// taken after it, and the verification below then vouches for
		// this transaction.
		if err := txnAppendError(h.addToTxn(*txnID, hdr.ProducerID, hdr.ProducerEpoch, p.Topic, p.Partition, false), abortable); err != nil {
			return 0, err
		}
	}
	guard := p.BeginVerification(hdr.ProducerID)
	if err := txnAppendError(h.addToTxn(*txnID, hdr.ProducerID, hdr.ProducerEpoch, p.Topic, p.Partition, true), abortable); err != nil {
		return 0, err
	}
	return guard, nil
}
