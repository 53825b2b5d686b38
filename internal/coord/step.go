package coord

import (
	"slices"
	"time"
)

// Stepped mode (Config.Stepped): the deterministic executor the simulator
// drives, as it drives the broker's partition owners. No goroutine is
// started: a shard's load, its queued events, its commit waits and its
// timers wait until Step runs them, one unit of work at a time, on the
// caller's goroutine, which is then the shard's owner. The semantics are
// those of the goroutine mode: events of a shard run one at a time in
// queue order, a write's done runs once the high watermark passes it, a
// failed commit rolls the state back to the last committed offset, and
// an unloaded shard fails its pending writes and queued events with
// ErrNotCoordinator.
//
// Differences a stepped caller sees: Run and Write wait for the stepper,
// so they must be called from another goroutine (or use Post and
// WriteAsync); Resign does not wait for the shard's unload, which the
// next Step finishes; timers fire from Step once the clock reached them,
// not from the clock's AfterFunc; a commit wait polls the replica (its
// CommitPoller, or else the high watermark and the leader epoch) instead
// of blocking in Replica.Commit.

// CommitPoller is what a stepped runtime asks of a replica that can say,
// without blocking, where the commit of the offsets below end stands: done
// with err nil once they are committed, done with an error once they
// never will be (leadership lost). A replica without it is polled through
// HighWatermark and LeaderEpoch: committed once the high watermark
// reaches end, failed with ErrNotCoordinator once the leader epoch moved
// off the shard's.
type CommitPoller interface {
	PollCommit(end int64) (done bool, err error)
}

// Step runs one unit of work of one shard, if any is ready, and reports
// whether it ran one. Shards are visited in partition order, starting
// after the one stepped last; within a shard the order is: finish an
// unload, load (and the Loaded hook), complete or fail the oldest commit
// wait the replica decided, fire the earliest due timer, run the oldest
// queued event. Only for a stepped runtime.
func (rt *Runtime[S]) Step() bool {
	rt.mu.Lock()
	if len(rt.dying) > 0 {
		s := rt.dying[0]
		rt.dying = rt.dying[1:]
		rt.mu.Unlock()
		s.finishUnload()
		return true
	}
	parts := make([]int32, 0, len(rt.shards))
	for p := range rt.shards {
		parts = append(parts, p)
	}
	rt.mu.Unlock()
	slices.Sort(parts)
	start, _ := slices.BinarySearch(parts, rt.lastStepped+1)
	for i := range parts {
		p := parts[(start+i)%len(parts)]
		if s := rt.shard(p); s != nil && s.stepOnce() {
			rt.lastStepped = p
			return true
		}
	}
	return false
}

// Drain steps until no work is ready and returns how many units ran.
func (rt *Runtime[S]) Drain() int {
	n := 0
	for rt.Step() {
		n++
	}
	return n
}

// WriteAsync is Write without waiting: it queues fn as a write event on
// the owner of partition part and calls cb on the owner with the response
// once the batch is committed, or with the error (ErrNotCoordinator,
// ErrLoading, fn's, the append's or the commit's). It fails at once, with
// cb not called, if there is no shard. For a stepped runtime, whose
// stepper cannot wait on Write.
func WriteAsync[S, R any](rt *Runtime[S], part int32, fn func(*Shard[S]) (batch []byte, undo func(), resp R, err error), cb func(R, error)) error {
	var zero R
	return rt.Post(part, func(s *Shard[S]) {
		batch, undo, resp, err := fn(s)
		switch {
		case err != nil:
			cb(zero, err)
		case batch == nil:
			cb(resp, nil)
		default:
			if _, err := s.Append(batch, undo, func(err error) {
				if err != nil {
					cb(zero, err)
				} else {
					cb(resp, nil)
				}
			}); err != nil {
				cb(zero, err)
			}
		}
	})
}

// stepOnce runs one unit of the shard's work (the stepper is its owner).
func (s *Shard[S]) stepOnce() bool {
	if s.Gone() {
		return false // the dying list finishes it
	}
	if !s.started {
		s.started = true
		if s.loadingState() && !s.load() {
			return true
		}
		if s.rt.cfg.Loaded != nil {
			s.rt.cfg.Loaded(s)
		}
		return true
	}
	if len(s.pending) > 0 {
		end := s.pending[0].end
		var done bool
		var err error
		if p, ok := s.r.(CommitPoller); ok {
			done, err = p.PollCommit(end)
		} else if s.r.HighWatermark() >= end {
			done = true
		} else if s.r.LeaderEpoch() != s.epoch {
			done, err = true, ErrNotCoordinator
		}
		if done {
			if err != nil {
				s.failed(err)
			} else {
				s.committed(max(s.r.HighWatermark(), end))
			}
			return true
		}
	}
	if key, ok := s.dueTimer(); ok {
		tm := s.timers[key]
		delete(s.timers, key)
		s.runEvent(&event[S]{fn: tm.fn, enqueued: time.Now()})
		return true
	}
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.mu.Unlock()
		return false
	}
	ev := s.queue[0]
	s.queue = s.queue[1:]
	s.mu.Unlock()
	s.runEvent(ev)
	return true
}

// dueTimer returns the key of the earliest timer the clock reached (ties
// by key).
func (s *Shard[S]) dueTimer() (string, bool) {
	now := s.Now()
	var best string
	found := false
	for k, t := range s.timers {
		if t.at.After(now) {
			continue
		}
		if !found || t.at.Before(s.timers[best].at) || (t.at.Equal(s.timers[best].at) && k < best) {
			best, found = k, true
		}
	}
	return best, found
}

// finishUnload is a stepped shard's unload, on the stepper.
func (s *Shard[S]) finishUnload() {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	s.unloaded(q)
	close(s.exited)
}
