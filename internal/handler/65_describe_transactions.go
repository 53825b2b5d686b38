package handler

// DescribeTransactions, version 0 (KIP-664; Kafka's
// handleDescribeTransactionsRequest): the state of each transactional id
// this node coordinates: state name, timeout, start time (-1 outside a
// transaction), producer id and epoch, and the partitions of the ongoing
// transaction. Each id needs DESCRIBE on it (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED); topics the principal may not
// DESCRIBE are left out. Other errors: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/txn"
)

// maxDescribeTxnIDs bounds the ids of one DescribeTransactions request.
const maxDescribeTxnIDs = 10000

func (t *txnAPI) describeTransactions(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for i, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.StartTimestamp, st.ProducerID, st.ProducerEpoch = id, -1, -1, -1
		var err *kerr.Error
		var m txn.Metadata
		switch {
		case i >= maxDescribeTxnIDs:
			err = kerr.InvalidRequest
		case !t.h.allowedTxnID(r, id, acl.OpDescribe):
			err = kerr.TransactionalIDAuthorizationFailed
		default:
			m, err = t.c.DescribeState(id)
		}
		if err != nil {
			st.ErrorCode = err.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State = m.State.String()
		st.TimeoutMillis = int32(m.Timeout.Milliseconds())
		if !m.Start.IsZero() {
			st.StartTimestamp = m.Start.UnixMilli()
		}
		st.ProducerID, st.ProducerEpoch = m.ProducerID, m.Epoch
		for _, p := range txn.SortedPartitions(m.Partitions) {
			if !t.h.allowedTopic(r, p.Topic, acl.OpDescribe) {
				continue
			}
			if n := len(st.Topics); n > 0 && st.Topics[n-1].Topic == p.Topic {
				st.Topics[n-1].Partitions = append(st.Topics[n-1].Partitions, p.Partition)
				continue
			}
			rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			rt.Topic, rt.Partitions = p.Topic, []int32{p.Partition}
			st.Topics = append(st.Topics, rt)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return protocol.Reply{Resp: resp}
}
