package group

// The stepped coordinator (Options.Stepped), for the deterministic
// simulator (internal/sim), which runs the brokers in step mode on one
// goroutine: the coordinator starts no goroutine and never blocks. Its
// runtime is stepped (coord.Config.Stepped); a request runs its event on
// the caller, which is then the shard's owner, and a response that waits
// for a write (OffsetCommit) comes with a Result whose Poll says when it
// is there; Step runs the rest (loads, commit polls, timers). The periodic
// reconciliation runs inline; the local replica is looked up without
// waiting for lagging metadata; __consumer_offsets is not created by the
// coordinator (the simulator creates it). Only the requests whose answer
// is a Result with Poll, or ready at once, can be served stepped
// (OffsetCommit, OffsetFetch); the others wait on channels.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/coord"
)

// replica returns the local replica of offsets partition i; a stepped
// coordinator does not wait for lagging metadata.
func (c *Coordinator) replica(i int32) (*broker.Partition, error) {
	if c.stepped {
		return c.b.PartitionBy(OffsetsTopic, i, time.Time{})
	}
	return c.b.Partition(OffsetsTopic, i)
}

// Step runs one unit of a stepped coordinator's work (coord.Runtime.Step)
// and reports whether it ran one.
func (c *Coordinator) Step() bool { return c.rt.Step() }

// Drain steps until no work is ready and returns how many units ran.
func (c *Coordinator) Drain() int { return c.rt.Drain() }

// runStepped runs fn on partition i's shard for a stepped coordinator:
// the caller is the stepper, so it steps the runtime until fn ran (the
// shard's earlier work first). A shard still loading answers
// COORDINATOR_NOT_AVAILABLE, as Run does.
func (c *Coordinator) runStepped(i int32, fn func(s *shard)) *kerr.Error {
	if info, ok := c.rt.Info(i); ok && info.Loading {
		return runError(coord.ErrLoading)
	}
	ran := false
	if err := c.rt.Post(i, func(s *shard) { ran = true; fn(s) }); err != nil {
		return runError(err)
	}
	for !ran && c.rt.Step() {
	}
	if !ran {
		return kerr.NotCoordinator
	}
	return nil
}
