package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Manual is a Clock whose time moves only by Advance or Set. Timers whose
// deadline is reached fire in deadline order, ties in creation order:
// channel timers get a non-blocking send (their channels hold one value,
// as time's do); AfterFunc functions run one after another on the
// goroutine that advanced the clock, outside the clock's lock. Sleep blocks
// until another goroutine advances the clock past its deadline.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap
}

// NewManual returns a Manual clock at start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now implements Clock.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer implements Clock.
func (m *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{m: m, c: make(chan time.Time, 1), index: -1}
	m.arm(t, d)
	return t
}

// AfterFunc implements Clock; f runs on the goroutine that advances the
// clock.
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	t := &manualTimer{m: m, f: f, index: -1}
	m.arm(t, d)
	return t
}

// NewTicker implements Clock.
func (m *Manual) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &manualTimer{m: m, c: make(chan time.Time, 1), period: d, index: -1}
	m.arm(t, d)
	return manualTicker{t}
}

// Sleep implements Clock.
func (m *Manual) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	<-m.NewTimer(d).C()
}

// Advance moves the clock d forward, firing every timer due on the way at
// its own deadline (the clock reads that deadline while it fires).
func (m *Manual) Advance(d time.Duration) { m.Set(m.Now().Add(d)) }

// Set moves the clock to t (never backwards), firing due timers in order.
func (m *Manual) Set(t time.Time) {
	for {
		m.mu.Lock()
		if len(m.timers) == 0 || m.timers[0].when.After(t) {
			if t.After(m.now) {
				m.now = t
			}
			m.mu.Unlock()
			return
		}
		tm := heap.Pop(&m.timers).(*manualTimer)
		if tm.when.After(m.now) {
			m.now = tm.when
		}
		now := m.now
		if tm.period > 0 {
			tm.when = now.Add(tm.period)
			tm.seq = m.nextSeq()
			heap.Push(&m.timers, tm)
		}
		m.mu.Unlock()
		if tm.f != nil {
			tm.f()
			continue
		}
		select {
		case tm.c <- now:
		default: // the reader has not taken the last one: dropped, as time's
		}
	}
}

// Next returns the earliest pending deadline, if any: a simulator jumps
// the clock there when nothing else is runnable.
func (m *Manual) Next() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.timers) == 0 {
		return time.Time{}, false
	}
	return m.timers[0].when, true
}

// Pending returns the number of armed timers.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

func (m *Manual) nextSeq() uint64 { m.seq++; return m.seq }

func (m *Manual) arm(t *manualTimer, d time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := t.index >= 0
	if was {
		heap.Remove(&m.timers, t.index)
	}
	t.when, t.seq = m.now.Add(max(d, 0)), m.nextSeq()
	heap.Push(&m.timers, t)
	return was
}

type manualTimer struct {
	m      *Manual
	c      chan time.Time
	f      func()
	period time.Duration // tickers
	when   time.Time
	seq    uint64
	index  int // in the heap, -1 if not armed
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.m.timers, t.index)
	return true
}

func (t *manualTimer) Reset(d time.Duration) bool { return t.m.arm(t, d) }

type timerHeap []*manualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*manualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

type manualTicker struct{ t *manualTimer }

func (t manualTicker) C() <-chan time.Time { return t.t.c }
func (t manualTicker) Stop()               { t.t.Stop() }
