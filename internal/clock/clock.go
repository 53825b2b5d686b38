// Package clock is the time source of the data plane: the broker, the
// request handlers and the group coordinator read the time and wait only
// through a Clock. Production uses Real; tests and the simulator use a
// Manual clock, whose time moves only when told and whose timers fire in
// deadline order, so a run is a function of its inputs.
package clock

import "time"

// Clock is a source of time and timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f, in its own goroutine, once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTicker returns a ticker that sends the time every d (d > 0),
	// dropping ticks a slow reader misses, as time.Ticker does.
	NewTicker(d time.Duration) Ticker
	// Sleep blocks for d.
	Sleep(d time.Duration)
}

// Timer is a time.Timer of some Clock.
type Timer interface {
	// C is the channel the time is sent on (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
	// Reset makes the timer fire d from now; it reports whether the timer
	// had been active.
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker of some Clock.
type Ticker interface {
	// C is the channel the ticks are sent on.
	C() <-chan time.Time
	// Stop turns the ticker off.
	Stop()
}

// Since is c.Now().Sub(t).
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Until is t.Sub(c.Now()).
func Until(c Clock, t time.Time) time.Duration { return t.Sub(c.Now()) }

// After is c.NewTimer(d).C(), for a select that does not stop the timer.
func After(c Clock, d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// Real is the operating system's clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time        { return time.Now() }
func (realClock) Sleep(d time.Duration) { time.Sleep(d) }
func (realClock) NewTimer(d time.Duration) Timer {
	return realTimer{time.NewTimer(d)}
}
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}
func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }
