package share

import "context"

// The writes of a share partition's state.
//
// An acknowledgement (or a member's release) is applied in memory under
// the partition's lock and its records marked pending; the Persister
// write that makes it durable runs without the lock, so that other
// members acquire and acknowledge meanwhile, as Kafka's SharePartition
// starts a state transition, writes the share-group state and completes
// (or rolls back) the transition when the write returns. One write of a
// partition is in flight at a time: the transitions applied while it runs
// are collected and carried together by the next one (Kafka batches its
// WriteShareGroupState requests too), whose writer is the first caller
// that waits for them once the slot is free. Writes are full states and
// are never reordered, so a later write never carries an older start
// offset. A pending record is not acquired, acknowledged, released or
// expired, and SPSO does not pass it; a failed write restores the
// records it carried to their state before (acquired by their member,
// with their lock deadline), and its error is every waiter's.
//
// Every write of a share partition goes through this path: the releases
// of expired locks and of a member's records (unsynced, expiry.go) and
// the end of an archiving (deadletter.go) wait for a write collecting
// transitions like an acknowledgement does, so one write is in flight at
// a time. Those are not undone when the write fails: an unsynced release
// stays unsynced until a later write succeeds. Archiving records go to
// the dead-letter sink only once the write carrying them succeeded.

// pendingWrite is the transitions one write carries.
type pendingWrite struct {
	// undo holds each record's state before its transition.
	undo map[int64]rec
	done chan struct{}
	err  error
}

// Pending is an acknowledgement or release applied in memory; Wait makes
// it durable.
type Pending struct {
	sp *Partition
	w  *pendingWrite
}

// pend returns the write collecting transitions, starting one.
func (sp *Partition) pend() *pendingWrite {
	if sp.next == nil {
		sp.next = &pendingWrite{undo: map[int64]rec{}, done: make(chan struct{})}
	}
	return sp.next
}

// save records r (offset o) before its transition and marks it pending.
func (w *pendingWrite) save(o int64, r *rec) {
	if _, ok := w.undo[o]; !ok {
		w.undo[o] = *r
	}
	r.pending = true
}

// at returns offset o's record, nil outside the window.
func (sp *Partition) at(o int64) *rec {
	if o < sp.start || o >= sp.end() {
		return nil
	}
	return &sp.recs[o-sp.start]
}

// Wait returns once the write carrying p's transitions returned, with
// its error (nil: durable). If no write is in flight it runs that write
// itself on ctx; otherwise it waits for the write in flight to return
// first. A Pending with nothing to write returns nil at once.
func (p *Pending) Wait(ctx context.Context) error {
	if p == nil || p.w == nil {
		return nil
	}
	sp, w := p.sp, p.w
	for {
		sp.mu.Lock()
		select {
		case <-w.done:
			sp.mu.Unlock()
			return w.err
		default:
		}
		if !sp.writing {
			// w is not done and no write is in flight: nobody took it,
			// so it is still the collecting one.
			sp.writing, sp.next = true, nil
			sp.gen++
			gen, st := sp.gen, sp.state()
			sp.mu.Unlock()
			err := sp.persister.Write(ctx, sp.key, st)
			sp.mu.Lock()
			sp.complete(w, gen, err)
			sp.writing = false
			close(sp.idle)
			sp.idle = make(chan struct{})
			sp.mu.Unlock()
			return err
		}
		idle := sp.idle
		sp.mu.Unlock()
		select {
		case <-idle:
		case <-w.done:
		}
	}
}

// complete ends w's transitions, carried by write number gen: done when
// err is nil (SPSO moves over them, the unsynced releases the write
// carried are durable, the Archiving records it made durable go to the
// dead-letter sink, and long polls wake), else undone (nothing goes to
// the sink).
func (sp *Partition) complete(w *pendingWrite, gen uint64, err error) {
	for o, old := range w.undo {
		r := sp.at(o)
		if r == nil {
			continue // the log start passed it
		}
		if err != nil {
			*r = old
		} else {
			r.pending = false
		}
	}
	w.err = err
	close(w.done)
	if err == nil {
		sp.synced(gen)
		sp.flushDeadLetters()
		sp.advance()
		sp.released()
	}
}
