package sim

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/sharecoord"
)

// Share requests on the simulator's one goroutine.
//
// The share partitions (internal/share) call their Persister
// synchronously, holding the partition's lock: a ShareFetch that loads a
// share partition, or an acknowledgement whose new state must be durable
// before it is answered, waits in the middle of the handler for the share
// coordinator, whose answer needs many simulation steps (the write is
// replicated). So each ShareFetch and ShareAcknowledge runs its real
// handler (through protocol.Local) on a goroutine of its own, and the
// simulator hands it the baton: it waits until the goroutine either
// finishes or calls the Persister, which parks it. Only one goroutine runs
// at a time, so a seed replays exactly. The parked call is served by the
// simulator as sharecoord.Persister serves it (find the key's coordinator
// in the calling broker's metadata, call it there, across the simulated
// network unless that is the caller, retry NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and unreachable
// brokers with a doubling backoff until its time is up,
// realSharePersisterTimeout), against the broker's
// real stepped share coordinator (sharecoord.Options.Stepped); its answer
// resumes the goroutine. A broker runs at most one share request at a
// time: a second one could wait on the share partition lock the first
// holds while parked, where the simulator cannot see it.

// realSharePersisterTimeout bounds a Persister call, as the context of
// sharecoord.Persister's calls does (sharecoord.DefaultTimeout, 30 s),
// scaled down like the share group's lock duration.
const realSharePersisterTimeout = 2 * time.Second

// shareReq is one share request running on its goroutine.
type shareReq struct {
	broker int32
	proc   *sbroker.Broker // the broker process serving it
	local  *protocol.Local
	member *shareMember // whose request it is, if a member's
	start  time.Time
	done   chan struct{}
	call   *shareCall // the Persister call it is parked on, if any
	// dead: its broker went away; its calls fail at once and its answer
	// is dropped.
	dead   bool
	finish func() // applies the answer, on the simulator's goroutine
}

type shareCallKind int8

const (
	shareCallRead shareCallKind = iota
	shareCallWrite
	shareCallInit
)

// shareCall is one Persister call of a share request.
type shareCall struct {
	from  int32
	kind  shareCallKind
	key   share.Key
	st    share.State // Write
	epoch int32       // Read: the leader epoch; Initialize: the state epoch
	start int64       // Initialize: the start offset
	res   chan shareAns

	deadline, retryAt time.Time
	backoff           time.Duration
	lastErr           error
	// sent is set while the call is at a coordinator (node, in process
	// proc); gen tells its answer from a stale one.
	sent     bool
	node     int32
	proc     *sbroker.Broker
	gen      int
	answered bool
	ans      shareAns
}

type shareAns struct {
	st  share.State
	err error
}

// simSharePersister is a broker's share.Persister in the simulated world.
type simSharePersister struct {
	w    *realWorld
	from int32
}

var _ share.Persister = simSharePersister{}

func (p simSharePersister) call(c *shareCall) shareAns {
	c.from, c.res = p.from, make(chan shareAns, 1)
	p.w.shr.calls <- c
	return <-c.res
}

// Initialize implements share.Persister.
func (p simSharePersister) Initialize(_ context.Context, key share.Key, stateEpoch int32, startOffset int64) error {
	return p.call(&shareCall{kind: shareCallInit, key: key, epoch: stateEpoch, start: startOffset}).err
}

// Read implements share.Persister.
func (p simSharePersister) Read(_ context.Context, key share.Key, leaderEpoch int32) (share.State, error) {
	a := p.call(&shareCall{kind: shareCallRead, key: key, epoch: leaderEpoch})
	return a.st, a.err
}

// Write implements share.Persister.
func (p simSharePersister) Write(_ context.Context, key share.Key, st share.State) error {
	return p.call(&shareCall{kind: shareCallWrite, key: key, st: st}).err
}

// errShareUnused answers the Persister calls no simulated request makes.
var errShareUnused = errors.New("sim: not simulated")

// Delete implements share.Persister (DeleteGroups; not simulated).
func (p simSharePersister) Delete(context.Context, share.Key) error { return errShareUnused }

// ReadSummary implements share.Persister (the admin APIs; not simulated).
func (p simSharePersister) ReadSummary(context.Context, share.Key) (share.Summary, error) {
	return share.Summary{}, errShareUnused
}

// shareRun starts fn, a share request's work, on its goroutine and runs
// it until it finishes or parks.
func (w *realWorld) shareRun(r *shareReq, fn func()) {
	r.done, r.start = make(chan struct{}), w.clk.Now()
	w.shr.reqs = append(w.shr.reqs, r)
	w.shr.running = r // before the goroutine starts: it reads it
	go func() {
		defer close(r.done)
		fn()
	}()
	w.shareAwait(r)
}

// shareAwait gives r the baton until it finishes or parks on a call the
// simulator cannot answer at once.
func (w *realWorld) shareAwait(r *shareReq) {
	for {
		select {
		case <-r.done:
			w.shr.running = nil
			for i, x := range w.shr.reqs {
				if x == r {
					w.shr.reqs = append(w.shr.reqs[:i], w.shr.reqs[i+1:]...)
					break
				}
			}
			if !r.dead && r.finish != nil {
				r.finish()
			}
			return
		case c := <-w.shr.calls:
			w.shr.running = nil
			r.call = c
			c.deadline, c.backoff = w.clk.Now().Add(realSharePersisterTimeout), 50*time.Millisecond
			if r.dead {
				c.answered, c.ans = true, shareAns{err: errUnreachable}
			} else {
				w.shareSend(c)
			}
			if !c.answered {
				return
			}
			w.shareResume(r, c.ans)
		}
	}
}

// shareResume answers r's parked call with a and gives r the baton (set
// before the send, which orders it before the goroutine's reads).
func (w *realWorld) shareResume(r *shareReq, a shareAns) {
	c := r.call
	r.call = nil
	w.shr.running = r
	c.res <- a
}

// shareCalls moves the parked calls: answers go back to their goroutine,
// calls due for a retry are sent again.
func (w *realWorld) shareCalls() {
	for _, r := range append([]*shareReq(nil), w.shr.reqs...) {
		c := r.call
		if c == nil {
			continue
		}
		w.shareCallDue(c)
		if c.answered {
			w.shareResume(r, c.ans)
			w.shareAwait(r)
		}
	}
}

// shareCallDue sends c again if its retry is due, and times it out if
// its time is up while it waits at a coordinator (its context's deadline).
func (w *realWorld) shareCallDue(c *shareCall) {
	now := w.clk.Now()
	switch {
	case c.answered:
	case c.sent && !now.Before(c.deadline):
		c.gen++
		c.sent, c.answered, c.ans = false, true, shareAns{err: context.DeadlineExceeded}
	case !c.sent && !now.Before(c.retryAt):
		w.shareSend(c)
	}
}

// shareBusy reports whether broker id runs a share request.
func (w *realWorld) shareBusy(id int32) bool {
	for _, r := range w.shr.reqs {
		if r.broker == id {
			return true
		}
	}
	return false
}

// shareSend sends c to its coordinator, as sharecoord.Persister does.
func (w *realWorld) shareSend(c *shareCall) {
	co := w.shr.coords[c.from]
	if co == nil {
		w.shareRetry(c, errUnreachable)
		return
	}
	node, e := co.Coordinator(sharecoord.CoordinatorKey(c.key))
	if e != nil {
		w.shareRetry(c, e)
		return
	}
	if node < 1 || node > realBrokers {
		w.shareRetry(c, kerr.CoordinatorNotAvailable)
		return
	}
	to, tc := w.brokers[node-1], w.shr.coords[node]
	if !to.up || tc == nil || node != c.from && (w.cut[[2]int32{c.from, node}] || !w.settling && w.chance(realDropP)) {
		w.shareRetry(c, errUnreachable)
		return
	}
	c.gen++
	gen := c.gen
	c.sent, c.node, c.proc = true, node, to.b
	reply := func(st share.State, err error) {
		if c.gen != gen || c.answered || !c.sent {
			return
		}
		c.sent = false
		if node != c.from && (w.cut[[2]int32{node, c.from}] || !w.settling && w.chance(realDropP)) {
			w.shareRetry(c, errUnreachable) // served, the answer lost
			return
		}
		if err != nil && shareRetriable(err) {
			w.shareRetry(c, err)
			return
		}
		c.answered, c.ans = true, shareAns{st: st, err: err}
	}
	switch c.kind {
	case shareCallRead:
		tc.ReadStepped(c.key, c.epoch, reply)
	case shareCallWrite:
		tc.WriteStepped(c.key, c.st, func(err error) { reply(share.State{}, err) })
	case shareCallInit:
		tc.InitializeStepped(c.key, c.epoch, c.start, func(err error) { reply(share.State{}, err) })
	}
}

// shareRetry holds c back before it goes again, or answers err once the
// call's time is up.
func (w *realWorld) shareRetry(c *shareCall, err error) {
	c.sent, c.lastErr = false, err
	now := w.clk.Now()
	if !now.Add(c.backoff).Before(c.deadline) {
		c.answered, c.ans = true, shareAns{err: err}
		return
	}
	c.retryAt = now.Add(c.backoff)
	c.backoff = min(2*c.backoff, time.Second)
}

// shareRetriable is sharecoord.Persister's rule.
func shareRetriable(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return true
	}
	switch ke {
	case kerr.NotCoordinator, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable,
		kerr.BrokerNotAvailable, kerr.RequestTimedOut:
		return true
	}
	return false
}

// stopShare: broker id goes down. Its requests end (their calls fail,
// their answers are dropped), calls waiting at its coordinator are
// retried elsewhere, connections to it are gone.
func (w *realWorld) stopShare(id int32) {
	if !w.shr.on {
		return
	}
	for _, r := range append([]*shareReq(nil), w.shr.reqs...) {
		c := r.call
		switch {
		case r.broker == id:
			r.dead = true
			if r.member != nil {
				r.member.busy = false
			}
			if c != nil {
				c.gen++
				w.shareResume(r, shareAns{err: errUnreachable})
				w.shareAwait(r)
			}
		case c != nil && c.sent && c.node == id:
			c.gen++
			w.shareRetry(c, errUnreachable)
		}
	}
	if c := w.shr.init; c != nil && c.sent && c.node == id {
		c.gen++
		w.shareRetry(c, errUnreachable)
	}
	delete(w.shr.coords, id)
	w.shareBrokerGone(id)
}

// drainShareCoords runs the up brokers' share coordinators' ready work.
func (w *realWorld) drainShareCoords() {
	for _, rb := range w.brokers {
		if c := w.shr.coords[rb.id]; rb.up && c != nil {
			c.Drain()
		}
	}
}
