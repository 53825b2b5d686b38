package handler_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
)

// awaitParked waits until exactly one long poll is parked on p with its
// timer armed (Partition.ParkedUntil) and returns that timer's deadline.
// A response on done before then fails the test: the poll answered
// without parking.
func awaitParked(t *testing.T, p *broker.Partition, done <-chan *kmsg.FetchResponse) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if u := p.ParkedUntil(); len(u) == 1 {
			return u[0]
		} else if len(u) > 1 {
			t.Fatalf("%d long polls parked, want 1", len(u))
		}
		select {
		case r := <-done:
			t.Fatalf("the long poll answered without parking: %+v", r)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the long poll never parked")
		}
		time.Sleep(time.Millisecond) // polls for an event that does happen
	}
}

// stillParked fails the test unless the one long poll parked on p still
// has its timer armed past clk's now. Manual.Advance fires every due timer
// before it returns, so this holds at once after an Advance, with no
// waiting: the clock has not ended the poll, and the poll has not
// answered because of it (a response already written would have needed
// its timer to fire). done must hold no response either.
func stillParked(t *testing.T, clk *clock.Manual, p *broker.Partition, done <-chan *kmsg.FetchResponse, why string) {
	t.Helper()
	if u := p.ParkedUntil(); len(u) != 1 || !u[0].After(clk.Now()) {
		t.Fatalf("%s: parked long polls' deadlines %v, clock at %v: want one after it", why, u, clk.Now())
	}
	select {
	case r := <-done:
		t.Fatalf("%s: the long poll answered: %+v", why, r)
	default:
	}
}
