package txn

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/coord"
)

// Result is a response that is either ready (Resp) or must be waited for
// (Wait, which blocks until it is; call it off the connection's reader).
// Poll, set with Wait when the response comes from the coordinator's
// owner, returns it without blocking once it is there (a stepped
// coordinator's caller cannot wait).
type Result[T any] struct {
	Resp T
	Wait func() T
	Poll func() (T, bool)
}

func ready[T any](r T) Result[T] { return Result[T]{Resp: r} }

func waitOn[T any](ch <-chan T) Result[T] {
	var got T
	have := false
	poll := func() (T, bool) {
		if !have {
			select {
			case got = <-ch:
				have = true
			default:
			}
		}
		return got, have
	}
	return Result[T]{Poll: poll, Wait: func() T {
		if !have {
			got, have = <-ch, true
		}
		return got
	}}
}

// Get returns the response, waiting for it if needed.
func (r Result[T]) Get() T {
	if r.Wait != nil {
		return r.Wait()
	}
	return r.Resp
}

// write appends transit t of m to s's partition (owner) and, once it is
// committed (below the high watermark), applies it to m and calls then
// with nil on the owner; on failure the transit is abandoned (the
// runtime's undo) and then gets the error Kafka's
// TransactionStateManager.appendTransactionToLog answers with, or
// NOT_COORDINATOR if the shard was unloaded first. then may be called
// before write returns (an append that fails at once).
func (c *Coordinator) write(s *shard, m *Metadata, t *Transit, then func(err *kerr.Error)) {
	st := s.State()
	_, err := s.Append(encodeBatch([]record{txnRecord(m.ID, t)}, c.clock.Now()), func() { m.Abandon(t) }, func(err error) {
		switch {
		case err == coord.ErrNotCoordinator:
			m.Abandon(t)
			then(kerr.NotCoordinator)
		case err != nil:
			c.log.Warn("transaction state not replicated", "partition", s.Partition(), "id", m.ID, "err", err)
			then(appendError(err))
		default:
			m.Complete(t)
			if t.State == Dead && st.txns[m.ID] == m {
				delete(st.txns, m.ID)
				c.numIDs.Add(-1)
			}
			then(nil)
			st.notify()
		}
	})
	switch {
	case err == coord.ErrNotCoordinator:
		then(kerr.NotCoordinator)
	case err != nil:
		c.log.Error("appending to "+Topic, "partition", s.Partition(), "err", err)
		then(appendError(err))
	}
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

// commitError maps a failed wait for the committed state (Shard.Read) to
// the request's answer.
func commitError(err error) *kerr.Error {
	if err == coord.ErrNotCoordinator {
		return kerr.NotCoordinator
	}
	return appendError(err)
}

// fromCommitted answers a request from the committed state (owner). res is
// what the request's event computed; dirty says whether the state showed
// records above the high watermark when the event began (those a load
// read to the log end: the coordinator applies its own writes only once
// committed, Shard.Readable). An answer that waits for a write is
// returned as is: a write is answered once committed, after every record
// before it. So is an answer computed from a committed state. Any other
// answer read state that a coordinator elected next may not have (Kafka
// answers from committed metadata, the TransactionMetadata of committed
// records with a pendingState for the write in flight): the request is
// answered by again, run on the owner once those records are committed
// (Shard.Read), or with fail's answer if that commit fails.
func fromCommitted[T any](s *shard, dirty bool, res Result[T], again func(*shard) Result[T], fail func(*kerr.Error) Result[T]) Result[T] {
	if !dirty || res.Wait != nil {
		return res
	}
	ch := make(chan Result[T], 1)
	s.Read(func(err error) {
		if err != nil {
			ch <- fail(commitError(err))
			return
		}
		ch <- again(s)
	})
	return chain(ch)
}

// chain is the answer that the Result sent on ch gives, once it is sent.
func chain[T any](ch <-chan Result[T]) Result[T] {
	var inner *Result[T]
	take := func(block bool) bool {
		if inner != nil {
			return true
		}
		if block {
			r := <-ch
			inner = &r
			return true
		}
		select {
		case r := <-ch:
			inner = &r
			return true
		default:
			return false
		}
	}
	poll := func() (T, bool) {
		var zero T
		switch {
		case !take(false):
			return zero, false
		case inner.Wait == nil:
			return inner.Resp, true
		case inner.Poll != nil:
			return inner.Poll()
		}
		return zero, false
	}
	return Result[T]{Poll: poll, Wait: func() T {
		take(true)
		return inner.Get()
	}}
}
