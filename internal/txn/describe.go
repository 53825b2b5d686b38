package txn

// What DescribeTransactions and ListTransactions report (Kafka's
// TransactionCoordinator.handleDescribeTransactions and
// TransactionStateManager.listTransactionStates, KIP-664), and Describe
// for tests and tools.

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// snapshot copies m, partitions included (owner).
func snapshot(m *Metadata) Metadata {
	out := *m
	out.Partitions = make(map[Partition]struct{}, len(m.Partitions))
	for k := range m.Partitions {
		out.Partitions[k] = struct{}{}
	}
	return out
}

// Describe returns a copy of a transactional id's state; ok is false
// when it is not known here.
func (c *Coordinator) Describe(id string) (m Metadata, ok bool) {
	m, err := c.DescribeState(id)
	return m, err == nil
}

// DescribeState returns a copy of a transactional id's state, or
// NOT_COORDINATOR (also when __transaction_state does not exist: nothing
// is created), COORDINATOR_LOAD_IN_PROGRESS, or TRANSACTIONAL_ID_NOT_FOUND.
// The state is the committed one: while the id's partition has records
// above the high watermark, the answer waits until they are committed
// (a stepped coordinator, which cannot wait, answers
// COORDINATOR_LOAD_IN_PROGRESS meanwhile).
func (c *Coordinator) DescribeState(id string) (Metadata, *kerr.Error) {
	if c.b.Image().Topics[Topic] == nil {
		return Metadata{}, kerr.NotCoordinator
	}
	type described struct {
		m     Metadata
		found bool
		err   *kerr.Error
	}
	read := func(s *shard) described {
		if m := s.State().txns[id]; m != nil && m.State != Dead {
			return described{m: snapshot(m), found: true}
		}
		return described{}
	}
	ch := make(chan described, 1)
	if err := c.run(id, func(s *shard) {
		if s.Readable() {
			ch <- read(s)
			return
		}
		s.Read(func(err error) {
			if err != nil {
				ch <- described{err: commitError(err)}
				return
			}
			ch <- read(s)
		})
	}); err != nil {
		return Metadata{}, err
	}
	var d described
	if c.stepped {
		select {
		case d = <-ch:
		default:
			return Metadata{}, kerr.CoordinatorLoadInProgress
		}
	} else {
		d = <-ch
	}
	switch {
	case d.err != nil:
		return Metadata{}, d.err
	case !d.found:
		return Metadata{}, kerr.TransactionalIDNotFound
	}
	return d.m, nil
}

// ListFilter selects transactions for List (ListTransactions' filters):
// empty States and ProducerIDs select all; MinDuration < 0 selects all,
// else only transactions running longer than it.
type ListFilter struct {
	States      map[State]bool
	ProducerIDs map[int64]bool
	MinDuration time.Duration
	// IDPattern, when set, must match the transactional id (the
	// caller anchors it to match the whole id).
	IDPattern *regexp.Regexp
}

// StateByName returns the state named name (Kafka's TransactionState
// names), false for an unknown name.
func StateByName(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// List returns a copy of every transactional id this node coordinates
// that f selects. loading is set when a shard is still loading (its ids
// are missing: Kafka answers COORDINATOR_LOAD_IN_PROGRESS).
func (c *Coordinator) List(f ListFilter) (out []Metadata, loading bool) {
	now := c.clock.Now()
	loading = c.forEachShard(func(s *shard) {
		for _, m := range s.State().txns {
			if f.selects(m, now) {
				out = append(out, snapshot(m))
			}
		}
	})
	return out, loading
}

// selects is Kafka's listTransactionStates filter: the start time of an
// id with no transaction counts as -1 (so any duration passes).
func (f ListFilter) selects(m *Metadata, now time.Time) bool {
	switch {
	case m.State == Dead:
		return false
	case len(f.ProducerIDs) > 0 && !f.ProducerIDs[m.ProducerID]:
		return false
	case len(f.States) > 0 && !f.States[m.State]:
		return false
	case f.IDPattern != nil && !f.IDPattern.MatchString(m.ID):
		return false
	}
	if f.MinDuration >= 0 {
		start := int64(-1)
		if !m.Start.IsZero() {
			start = m.Start.UnixMilli()
		}
		if now.UnixMilli()-start <= f.MinDuration.Milliseconds() {
			return false
		}
	}
	return true
}
