package clock

import (
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestManualOrder: timers fire in deadline order, ties in creation order,
// each seeing the clock at its own deadline; Stop and Reset take effect.
func TestManualOrder(t *testing.T) {
	m := NewManual(t0)
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+m.Now().Sub(t0).String()) }
	}
	m.AfterFunc(3*time.Second, at("c"))
	m.AfterFunc(time.Second, at("a"))
	m.AfterFunc(time.Second, at("b"))
	stopped := m.AfterFunc(2*time.Second, at("stopped"))
	moved := m.AfterFunc(time.Second, at("moved"))
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should report true once, then false")
	}
	if !moved.Reset(4 * time.Second) {
		t.Fatal("Reset of an armed timer should report true")
	}
	m.Advance(5 * time.Second)
	want := []string{"a@1s", "b@1s", "c@3s", "moved@4s"}
	if len(got) != len(want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fired %v, want %v", got, want)
		}
	}
	if m.Now() != t0.Add(5*time.Second) || m.Pending() != 0 {
		t.Fatalf("now %v, %d pending", m.Now(), m.Pending())
	}
}

// TestManualChannels: a channel timer holds one value; a ticker drops the
// ticks its reader misses; Next names the earliest deadline; Sleep returns
// once another goroutine advances past it.
func TestManualChannels(t *testing.T) {
	m := NewManual(t0)
	tm := m.NewTimer(time.Second)
	tk := m.NewTicker(time.Second)
	if next, ok := m.Next(); !ok || next != t0.Add(time.Second) {
		t.Fatalf("Next = %v %v", next, ok)
	}
	m.Advance(3500 * time.Millisecond)
	if v := <-tm.C(); v != t0.Add(time.Second) {
		t.Fatalf("timer sent %v", v)
	}
	if v := <-tk.C(); v != t0.Add(time.Second) {
		t.Fatalf("first tick %v (later ones dropped while unread)", v)
	}
	select {
	case v := <-tk.C():
		t.Fatalf("a missed tick was kept: %v", v)
	default:
	}
	tk.Stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.Sleep(time.Second)
	}()
	for m.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	m.Advance(time.Second)
	wg.Wait()
}
