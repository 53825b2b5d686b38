package handler

// ListTransactions, versions 0-1 (KIP-664; v1: the duration filter,
// KIP-994; Kafka's handleListTransactionsRequest): the transactional ids
// this node coordinates, with their producer id and state, filtered by
// state names (unknown names are echoed in UnknownStateFilters and select
// nothing), producer ids, and (v1) a minimum running time; only ids the
// principal may DESCRIBE are listed. COORDINATOR_LOAD_IN_PROGRESS while a
// __transaction_state partition is loading. v2's transactional id pattern
// (a Java regular expression) is not served.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/txn"
)

func (t *txnAPI) listTransactions(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{States: map[txn.State]bool{}, ProducerIDs: map[int64]bool{}, MinDuration: -1}
	for _, name := range req.StateFilters {
		if st, ok := txn.StateByName(name); ok {
			f.States[st] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(resp.UnknownStateFilters) > 0 && len(f.States) == 0 {
		// Only unknown states asked for: nothing matches.
		return protocol.Reply{Resp: resp}
	}
	for _, pid := range req.ProducerIDFilters {
		f.ProducerIDs[pid] = true
	}
	if req.Version >= 1 && req.DurationFilterMillis >= 0 {
		f.MinDuration = time.Duration(req.DurationFilterMillis) * time.Millisecond
	}
	list, loading := t.c.List(f)
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return protocol.Reply{Resp: resp}
	}
	for _, m := range list {
		if !t.h.allowedTxnID(r, m.ID, acl.OpDescribe) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = m.ID, m.ProducerID, m.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return protocol.Reply{Resp: resp}
}
