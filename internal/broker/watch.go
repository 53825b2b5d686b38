package broker

import (
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
)

// Watcher wakes one long-poll fetch when any of the partitions it watches
// changes (its high watermark, log end, log start or role: whatever closes
// Partition.Changed). A fetch over 10,000 partitions registers once with
// each instead of parking a goroutine per partition.
type Watcher struct {
	clock clock.Clock
	c     chan struct{}
	parts []*Partition
	// until is, while Wait blocks with its timer armed, that timer's
	// deadline in UnixNano (0 otherwise); Partition.ParkedUntil reads it.
	until atomic.Int64
}

// NewWatcher watches parts until Close.
func (b *Broker) NewWatcher(parts []*Partition) *Watcher {
	w := &Watcher{clock: b.clock, c: make(chan struct{}, 1), parts: parts}
	for _, p := range parts {
		p.notifyMu.Lock()
		if p.watchers == nil {
			p.watchers = map[*Watcher]struct{}{}
		}
		p.watchers[w] = struct{}{}
		p.notifyMu.Unlock()
	}
	return w
}

// Close stops watching.
func (w *Watcher) Close() {
	for _, p := range w.parts {
		p.notifyMu.Lock()
		delete(p.watchers, w)
		p.notifyMu.Unlock()
	}
}

// Wait returns true once a watched partition changes, or at once if one of
// since (Changed channels taken before the caller's last read) is closed
// already; false when d passes or gone is closed first (the fetching
// connection went away: the long poll answers with what it has).
func (w *Watcher) Wait(since []<-chan struct{}, d time.Duration, gone <-chan struct{}) bool {
	for _, c := range since {
		select {
		case <-c:
			return true
		default:
		}
	}
	if d <= 0 {
		return false
	}
	// until is read before the timer is armed: if the clock moves in
	// between, the timer's real deadline is later, never earlier.
	until := w.clock.Now().Add(d).UnixNano()
	timer := w.clock.NewTimer(d)
	defer timer.Stop()
	w.until.Store(until)
	defer w.until.Store(0)
	select {
	case <-w.c:
		return true
	case <-timer.C():
		return false
	case <-gone:
		return false
	}
}

// Watchers is the number of long-poll fetches parked on p.
func (p *Partition) Watchers() int {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	return len(p.watchers)
}

// ParkedUntil returns, for each long-poll fetch parked on p whose Wait has
// its timer armed, that timer's deadline (a lower bound of it, if the clock
// moved while it was armed). It is a test hook: on a clock.Manual, which
// fires due timers before Advance returns, a deadline after the clock's
// Now means the poll has not timed out, and cannot have answered because
// of the clock.
func (p *Partition) ParkedUntil() []time.Time {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	var out []time.Time
	for w := range p.watchers {
		if u := w.until.Load(); u != 0 {
			out = append(out, time.Unix(0, u))
		}
	}
	return out
}

// notifyWatchers wakes p's watchers (notifyMu held).
func (p *Partition) notifyWatchers() {
	for w := range p.watchers {
		select {
		case w.c <- struct{}{}:
		default:
		}
	}
}
