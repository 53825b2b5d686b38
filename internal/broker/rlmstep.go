package broker

// The remote log manager in step mode (Options.Steps; StepRemote). A pass
// of the manager (rlm.pass) waits for what other brokers' steps decide:
// each __remote_log_metadata record it writes is answered once the
// metadata partition's followers have fetched it (acks=all). So in step
// mode a pass runs as a coroutine (iter.Pull): StepRemote runs it on the
// caller's behalf until it finishes or has to wait, in which case it
// parks with a condition (stepWait); a later StepRemote whose condition
// holds resumes it. The caller and the pass never run at the same time
// (a coroutine switch hands over control), every copy of one pass runs
// one after the other, and the pass starts no goroutine, so the same
// sequence of steps gives the same pass.

import (
	"context"
	"errors"
	"iter"
	"time"
)

// stepOpTime bounds a __remote_log_metadata write in step mode, on the
// broker's clock (opCtx sets no real-time deadline then).
const stepOpTime = 2 * time.Second

// errStepStopped ends a parked pass whose broker closed or crashed
// (StopRemoteStep).
var errStepStopped = errors.New("remote log manager: step mode pass stopped")

// rlmStepper is the pass of step mode in progress, if any (the caller's
// goroutine only).
type rlmStepper struct {
	next  func() (func() bool, bool)
	stop  func()
	yield func(func() bool) bool
	// ready is the condition the parked pass waits for.
	ready func() bool
	// stopped is set by StopRemoteStep: waits fail at once.
	stopped bool
}

// stepParkKey carries the rlm of a step mode pass in the contexts of its
// calls (StepWait).
type stepParkKey struct{}

// StepRemote is one step of the remote log manager (rlm.go): a pass
// (copies of the eligible segments, expiration, local retention) started
// if none is in progress, or resumed if the one in progress waits for
// something that has happened (a __remote_log_metadata write answered).
// It returns once the pass finished or waits again. Nothing without
// Options.RemoteStore.
func (b *Broker) StepRemote() {
	r := b.rlm
	if r == nil || !b.steps || r.step.stopped {
		return
	}
	st := &r.step
	if st.next == nil {
		st.next, st.stop = iter.Pull(func(yield func(func() bool) bool) {
			st.yield = yield
			r.pass()
		})
	} else if !st.ready() {
		return
	}
	ready, ok := st.next()
	if !ok {
		st.next, st.stop, st.yield, st.ready = nil, nil, nil, nil
		return
	}
	st.ready = ready
}

// StopRemoteStep ends the step mode pass in progress: its waits fail
// (the pass unwinds as after an error) and no pass starts again. The
// simulator calls it when it drops a crashed broker; Close calls it.
func (b *Broker) StopRemoteStep() {
	r := b.rlm
	if r == nil || !b.steps {
		return
	}
	r.step.stopped = true
	if r.step.stop != nil {
		r.step.stop()
		r.step.next, r.step.stop, r.step.yield, r.step.ready = nil, nil, nil, nil
	}
}

// stepWait parks the step mode pass until ready holds; false if the pass
// was stopped.
func (r *rlm) stepWait(ready func() bool) bool {
	st := &r.step
	if st.stopped || st.yield == nil {
		return false
	}
	if ready() {
		return true
	}
	if !st.yield(ready) {
		st.stopped = true
		return false
	}
	return !st.stopped
}

// taskCtx is the context of a pass's calls: the broker's, carrying the
// manager in step mode (StepWait).
func (r *rlm) taskCtx() context.Context {
	if !r.b.steps {
		return r.b.ctx
	}
	return context.WithValue(r.b.ctx, stepParkKey{}, r)
}

// opCtx bounds one object store or metadata call by opTime; in step mode
// it sets no deadline (a real-time timer would make a pass depend on how
// fast its caller runs: the waits of step mode are bounded on the
// broker's clock instead).
func (r *rlm) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.b.steps {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, r.opTime)
}

// StepWait parks the step mode remote log manager pass whose call ctx is
// (a Transport serving that pass's request to another broker, which needs
// other steps to be answered) until ready holds, and reports true; false
// if the pass was stopped meanwhile. It reports false at once when ctx is
// not a step mode pass's, and the caller must not wait.
func StepWait(ctx context.Context, ready func() bool) bool {
	r, _ := ctx.Value(stepParkKey{}).(*rlm)
	if r == nil {
		return false
	}
	return r.stepWait(ready)
}
