package handler

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/txn"
)

// txnAPI serves the transaction APIs against one transaction coordinator.
// The handler files 24..26, 65 and 66 are its methods (the transactional
// branch of 22 uses the same coordinator); the protocol logic lives in
// internal/txn, these only check authorization, adapt kmsg requests, map
// errors to what each version knows, and answer through Reply.Await.
type txnAPI struct {
	h *Handlers
	c *txn.Coordinator
}

// registerTxnAPIs installs AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// DescribeTransactions and ListTransactions, served by a transaction
// coordinator configured from the broker properties; InitProducerId
// (registered with the other APIs) and FindCoordinator's transaction keys
// use the same coordinator: c, or if nil a new one.
func (h *Handlers) registerTxnAPIs(reg *protocol.Registry, c *txn.Coordinator) {
	if c == nil {
		c = txn.New(h.b, txn.Options{Config: txn.ConfigFrom(h.b.Config())})
	}
	h.txns = c
	// Coordinate the transactional ids of the __transaction_state
	// partitions this node leads.
	// The leader epoch orders the changes: a stale one is ignored.
	h.b.OnLeadershipChange(func(tp broker.TP, isLeader bool, epoch int32) {
		if tp.Topic != txn.Topic {
			return
		}
		if isLeader {
			c.ElectAt(tp.Partition, epoch)
		} else {
			c.ResignAt(tp.Partition, epoch)
		}
	})
	// transaction.version (KIP-890 part 2): supported 0-2, finalized at
	// sluice.transaction.version.
	h.txnVersion = int16(h.b.Config().Int("sluice.transaction.version", 2))
	reg.SetFeature(protocol.Feature{Name: "transaction.version", Min: 0, Max: 2, Finalized: h.txnVersion})
	t := &txnAPI{h: h, c: c}
	for _, api := range []protocol.Handler{
		{Key: 24, MinVersion: 0, MaxVersion: 5, Serve: t.addPartitionsToTxn},
		{Key: 25, MinVersion: 0, MaxVersion: 4, Serve: t.addOffsetsToTxn},
		{Key: 26, MinVersion: 0, MaxVersion: 5, Serve: t.endTxn},
		{Key: 65, MinVersion: 0, MaxVersion: 0, Serve: t.describeTransactions},
		{Key: 66, MinVersion: 0, MaxVersion: 2, Serve: t.listTransactions},
	} {
		reg.Register(api)
	}
}

// txnReply answers with the coordinator's result, at once or through
// Reply.Await.
func txnReply[T any](r txn.Result[T], build func(T) kmsg.Response) protocol.Reply {
	if r.Wait == nil {
		return protocol.Reply{Resp: build(r.Resp)}
	}
	return protocol.Reply{Await: func() kmsg.Response { return build(r.Wait()) }}
}

// fencedCode is the code of err for a request version: versions before
// fencedSince predate PRODUCER_FENCED (KIP-588) and get
// INVALID_PRODUCER_EPOCH instead, as Kafka answers them.
func fencedCode(err *kerr.Error, version, fencedSince int16) int16 {
	if err == nil {
		return 0
	}
	if err == kerr.ProducerFenced && version < fencedSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return err.Code
}

// allowedTxnID is allowed for a transactional id.
func (h *Handlers) allowedTxnID(r *protocol.Request, id string, op acl.Operation) bool {
	return h.allowed(r, acl.ResourceTransactionalID, id, op)
}
