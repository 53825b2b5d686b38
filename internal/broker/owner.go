package broker

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/storage"
)

// One owner per partition.
//
// A partition's replica machine, its log's writes and its waiters are
// driven by one owner at a time, as etcd's node.run drives its raft
// machine: every event (a produce, a fetch, a fetch response, a tick, a
// flush completion, an ISR answer, a metadata change, a read of the
// machine's state) is a step, a function run by the owner, in arrival
// order; after each step the owner executes what the machine decided
// (processReady). There is no goroutine per partition: a goroutine that
// hands in a step while no one owns the partition becomes the owner and
// runs it, and every step queued meanwhile by others, before it lets go
// (the partition is an actor without a thread of its own). A step posted
// with post returns at once (produce, a tick, a flush completion, an ISR
// answer); one handed in with do returns once it has run (a fetch, a
// status read, a metadata change). In step mode (Options.Steps) every
// event comes from the simulator's goroutine, so each is run at once by
// its caller, in a deterministic order.
//
// A step must not hand in a step of the same partition and wait for it
// (do): it would wait for itself. Steps may post.

// maxStepsPerTurn bounds how many steps of others an owner runs before it
// hands the queue to a background owner (Broker.goBackground) and returns
// to its own work: a connection goroutine that took the partition over
// does not serve everyone else's produce requests for ever.
const maxStepsPerTurn = 256

// step is one event for the owner.
type step struct {
	fn   func()
	done chan struct{} // closed once fn has run; nil when no one waits
	// read: fn only reads the machine, so nothing follows it (no
	// processReady).
	read bool
}

// do runs fn as the partition's owner and returns once it has run.
func (p *Partition) do(fn func()) {
	if done := p.hand(step{fn: fn}, true); done != nil {
		<-done
	}
}

// view is do for a step that only reads the machine (a status, a
// consumer's fetch): the machine has decided nothing new, so no Ready is
// executed after it.
func (p *Partition) view(fn func()) {
	if done := p.hand(step{fn: fn, read: true}, true); done != nil {
		<-done
	}
}

// post hands fn to the partition's owner and returns, having run it
// itself if there was no owner.
func (p *Partition) post(fn func()) { p.hand(step{fn: fn}, false) }

// hand runs s (and then every step queued meanwhile) if the partition
// has no owner, or queues it for the owner; queued with wait set, it
// returns a channel closed once s has run.
func (p *Partition) hand(s step, wait bool) chan struct{} {
	p.qmu.Lock()
	if !p.owned {
		// No owner, so nothing queued: run it now.
		p.owned = true
		p.qmu.Unlock()
		p.runStep(s)
		p.own()
		return nil
	}
	if wait {
		s.done = make(chan struct{})
	}
	p.queue = append(p.queue, s)
	p.qmu.Unlock()
	return s.done
}

// runStep runs one step and executes the machine's decisions.
func (p *Partition) runStep(s step) {
	if p.b.checkWriters {
		p.stepG.Store(goid())
		defer p.stepG.Store(0)
	}
	s.fn()
	if !s.read && !p.closed {
		p.processReady()
	}
}

// own runs the queued steps until none is left, then lets go; after
// maxStepsPerTurn steps it hands ownership to a background goroutine.
func (p *Partition) own() {
	ran := 0
	for {
		p.qmu.Lock()
		if len(p.queue) == 0 {
			p.owned = false
			p.qmu.Unlock()
			return
		}
		if ran >= maxStepsPerTurn && !p.b.steps && p.b.goBackground(p.own) {
			p.qmu.Unlock()
			return
		}
		// Two buffers: others append to one while the owner runs the
		// other.
		turn := p.queue
		p.queue, p.spare = p.spare, nil
		p.qmu.Unlock()
		for i := range turn {
			p.runStep(turn[i])
			if turn[i].done != nil {
				close(turn[i].done)
			}
			turn[i] = step{}
		}
		ran += len(turn)
		p.spare = turn[:0]
	}
}

// writer is the partition's log's hand-off to its owner
// (storage.Writer): the log's one writer is the owner, whose steps run
// what the other actors hand it.
func (p *Partition) writer() storage.Writer {
	w := storage.Writer{Run: p.do}
	if p.b.checkWriters {
		w.Check = func() bool { return p.stepG.Load() == goid() }
	}
	return w
}

// goid is the id of the calling goroutine, read from its stack header
// ("goroutine N [...") — for Options.CheckWriters only.
func goid() int64 {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	s = bytes.TrimPrefix(s, []byte("goroutine "))
	if i := bytes.IndexByte(s, ' '); i > 0 {
		s = s[:i]
	}
	id, _ := strconv.ParseInt(string(s), 10, 64)
	return id
}

// WriterViolations returns how many changes of the partitions' logs ran
// outside their owner's steps, and which, per partition
// (Options.CheckWriters).
func (b *Broker) WriterViolations() (int64, string) {
	var n int64
	var which []string
	for _, p := range b.Partitions() {
		if k, ops := p.log.WriterViolations(); k > 0 {
			which = append(which, p.Topic+"-"+strconv.Itoa(int(p.Partition))+": "+ops)
			n += k
		}
	}
	return n, strings.Join(which, "; ")
}
