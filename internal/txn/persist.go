package txn

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Result is a response that is either ready (Resp) or must be waited for
// (Wait, which blocks until it is; call it off the connection's reader).
type Result[T any] struct {
	Resp T
	Wait func() T
}

func ready[T any](r T) Result[T] { return Result[T]{Resp: r} }

func waitOn[T any](ch <-chan T) Result[T] {
	return Result[T]{Wait: func() T { return <-ch }}
}

// Get returns the response, waiting for it if needed.
func (r Result[T]) Get() T {
	if r.Wait != nil {
		return r.Wait()
	}
	return r.Resp
}

// write appends transit t of m to s's partition (s.mu held) and, once it
// is durable (below the high watermark), applies it to m and calls then
// with nil under s.mu; on failure the transit is abandoned and then gets
// the error Kafka's TransactionStateManager.appendTransactionToLog
// answers with. then may be called before write returns (an append that
// fails at once).
func (c *Coordinator) write(s *shard, m *Metadata, t *Transit, then func(err *kerr.Error)) {
	info, err := s.p.Append(encodeBatch([]record{txnRecord(m.ID, t)}, c.clock.Now()), c.clock.Now())
	if err != nil {
		c.log.Error("appending to "+Topic, "partition", s.index, "err", err)
		m.Abandon(t)
		then(appendError(err))
		return
	}
	p, end := s.p, info.LastOffset+1
	// Not counted in c.work: Close does not wait for replication (a
	// waiter finds the shard gone and answers NOT_COORDINATOR).
	go func() {
		err := p.Commit(end)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gone {
			m.Abandon(t)
			then(kerr.NotCoordinator)
			return
		}
		if err != nil {
			c.log.Warn("transaction state not replicated", "partition", s.index, "id", m.ID, "err", err)
			m.Abandon(t)
			then(appendError(err))
			return
		}
		m.Complete(t)
		if t.State == Dead && s.txns[m.ID] == m {
			delete(s.txns, m.ID)
			c.numIDs.Add(-1)
		}
		then(nil)
		s.notify()
	}()
}

// appendError maps a failed append or replication to the coordinator's
// answer (TransactionStateManager.appendTransactionToLog).
func appendError(err error) *kerr.Error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.UnknownServerError
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return kerr.UnknownServerError
	}
	return ke
}
