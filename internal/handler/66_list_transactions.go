package handler

// ListTransactions, versions 0-2 (KIP-664; v1: the duration filter,
// KIP-994; v2: the transactional id pattern, KIP-1152; Kafka's
// handleListTransactionsRequest): the transactional ids this node
// coordinates, with their producer id and state, filtered by state names
// (unknown names are echoed in UnknownStateFilters and select nothing),
// producer ids, (v1) a minimum running time and (v2) a regular expression
// the whole id must match (RE2 syntax, as Kafka's re2j; null or empty:
// every id; one that does not compile, or longer than
// maxTxnIDPatternLen: INVALID_REGULAR_EXPRESSION); only ids the
// principal may DESCRIBE are listed. COORDINATOR_LOAD_IN_PROGRESS while a
// __transaction_state partition is loading.

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/txn"
)

// maxTxnIDPatternLen bounds ListTransactions v2's pattern (bytes); a
// transactional id is a Kafka string of at most 32,767 bytes.
const maxTxnIDPatternLen = 32767

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
	if p := req.TransactionalIDPattern; req.Version >= 2 && p != nil && *p != "" {
		var re *regexp.Regexp
		var err error
		if len(*p) <= maxTxnIDPatternLen {
			re, err = regexp.Compile(`^(?:` + *p + `)$`)
		}
		if re == nil || err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return protocol.Reply{Resp: resp}
		}
		f.IDPattern = re
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
