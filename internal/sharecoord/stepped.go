package sharecoord

// The stepped coordinator (Options.Stepped), for the deterministic
// simulator (internal/sim), which runs the brokers in step mode on one
// goroutine: the runtime starts no goroutine (coord.Config.Stepped) and
// Step runs its work (loads, commit polls, timers, queued events). The
// blocking operations (Initialize, Read, Write, ...) wait for the stepper
// and so must not be called from it; the stepper calls their *Stepped
// forms instead, which run the operation's event at once, on the
// stepper, and call done once it is answered (after its records are
// committed, from a later Step).

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/share"
)

// Step runs one unit of a stepped coordinator's work and reports whether
// it ran one.
func (c *Coordinator) Step() bool { return c.rt.Step() }

// Drain steps until no work is ready and returns how many units ran.
func (c *Coordinator) Drain() int { return c.rt.Drain() }

// runStepped runs op on key's shard on the caller, the stepper (the
// shard's earlier work first), and calls done with its answer: at once
// when the shard is missing or loading (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, as Run answers), otherwise when op
// replies.
func (c *Coordinator) runStepped(key share.Key, op func(s *shard, reply func(error)), done func(error)) {
	i, e := c.partition(key)
	if e != nil {
		done(e)
		return
	}
	if info, ok := c.rt.Info(i); ok && info.Loading {
		done(kerr.CoordinatorLoadInProgress)
		return
	}
	ran := false
	if err := c.rt.Post(i, func(s *shard) { ran = true; op(s, done) }); err != nil {
		done(runError(err))
		return
	}
	for !ran && c.rt.Step() {
	}
	if !ran {
		done(kerr.NotCoordinator)
	}
}

// InitializeStepped is Initialize for the stepper of a stepped
// coordinator: done is called once it is answered.
func (c *Coordinator) InitializeStepped(key share.Key, stateEpoch int32, startOffset int64, done func(error)) {
	c.runStepped(key, c.initializeOp(key, stateEpoch, startOffset), done)
}

// WriteStepped is Write for the stepper of a stepped coordinator: done is
// called once it is answered.
func (c *Coordinator) WriteStepped(key share.Key, st share.State, done func(error)) {
	if !c.known(key) {
		done(kerr.UnknownTopicOrPartition)
		return
	}
	c.runStepped(key, c.writeOp(key, st), done)
}

// ReadStepped is Read for the stepper of a stepped coordinator: done is
// called once it is answered.
func (c *Coordinator) ReadStepped(key share.Key, leaderEpoch int32, done func(share.State, error)) {
	if !c.known(key) {
		done(share.State{}, kerr.UnknownTopicOrPartition)
		return
	}
	var out share.State
	c.runStepped(key, c.readOp(key, leaderEpoch, &out), func(err error) {
		if err != nil {
			done(share.State{}, err)
			return
		}
		done(out, nil)
	})
}
