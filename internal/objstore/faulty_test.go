package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestFaultyPassThrough(t *testing.T) {
	ctx := context.Background()
	f := NewFaulty(&Memory{}, 1)
	if err := f.Put(ctx, "k", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	r, err := f.Get(ctx, "k", 1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(r); string(b) != "bc" {
		t.Fatalf("got %q", b)
	}
	if keys, err := f.List(ctx, ""); err != nil || len(keys) != 1 {
		t.Fatalf("list %v %v", keys, err)
	}
	if err := f.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if c := f.Counts(); c != (FaultCounts{}) {
		t.Fatalf("counts %+v", c)
	}
}

func TestFaultyOutage(t *testing.T) {
	ctx := context.Background()
	m := &Memory{}
	f := NewFaulty(m, 1)
	f.SetOutage(true)
	if err := f.Put(ctx, "k", strings.NewReader("abc"), 3); !errors.Is(err, ErrInjected) {
		t.Fatalf("put in outage: %v", err)
	}
	if _, err := f.Get(ctx, "k", 0, -1); !errors.Is(err, ErrInjected) {
		t.Fatalf("get in outage: %v", err)
	}
	if _, err := f.List(ctx, ""); !errors.Is(err, ErrInjected) {
		t.Fatalf("list in outage: %v", err)
	}
	if err := f.Delete(ctx, "k"); !errors.Is(err, ErrInjected) {
		t.Fatalf("delete in outage: %v", err)
	}
	if keys, _ := m.List(ctx, ""); len(keys) != 0 {
		t.Fatalf("outage put reached the store: %v", keys)
	}
	f.SetOutage(false)
	if err := f.Put(ctx, "k", strings.NewReader("abc"), 3); err != nil {
		t.Fatalf("after outage: %v", err)
	}
	if c := f.Counts(); c.Outages != 4 {
		t.Fatalf("counts %+v", c)
	}
}

// TestFaultyErrorRateSeeded: the error rate is about what is asked, and a
// seed gives the same sequence of failures.
func TestFaultyErrorRateSeeded(t *testing.T) {
	ctx := context.Background()
	run := func(seed uint64) []bool {
		f := NewFaulty(&Memory{}, seed)
		f.Set(Faults{ErrorRate: 0.3})
		out := make([]bool, 2000)
		for i := range out {
			_, err := f.List(ctx, "")
			if err != nil && !errors.Is(err, ErrInjected) {
				t.Fatal(err)
			}
			out[i] = err != nil
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	fails := 0
	for _, x := range a {
		if x {
			fails++
		}
	}
	if fails < 500 || fails > 700 {
		t.Fatalf("%d of 2000 failed at rate 0.3", fails)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 differs at %d", i)
		}
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("seeds 7 and 8 gave the same sequence")
	}
}

func TestFaultyTimeout(t *testing.T) {
	f := NewFaulty(&Memory{}, 1)
	f.Set(Faults{TimeoutRate: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, err := f.Get(ctx, "k", 0, -1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: %v", err)
	}
	if now := time.Now(); now.Before(deadline) {
		t.Fatalf("returned %v before the deadline", deadline.Sub(now))
	}
}

func TestFaultyLatency(t *testing.T) {
	f := NewFaulty(&Memory{}, 1)
	f.Set(Faults{Latency: 30 * time.Millisecond, Jitter: 10 * time.Millisecond})
	start := time.Now()
	if _, err := f.List(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("took %v", d)
	}
	// The delay honours the context.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := f.List(ctx, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delay past the deadline: %v", err)
	}
}

// TestFaultyPartialUpload: a cut-off Put consumes part of its body and
// leaves nothing visible.
func TestFaultyPartialUpload(t *testing.T) {
	ctx := context.Background()
	m := &Memory{}
	f := NewFaulty(m, 3)
	f.Set(Faults{PartialRate: 1})
	body := bytes.NewReader(bytes.Repeat([]byte("x"), 1000))
	err := f.Put(ctx, "seg", body, 1000)
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("partial put: %v", err)
	}
	if left := body.Len(); left == 0 {
		t.Fatalf("the whole body was consumed")
	}
	if _, err := m.Get(ctx, "seg", 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("partial upload visible: %v", err)
	}
	if keys, _ := f.List(ctx, ""); len(keys) != 0 {
		t.Fatalf("listed %v", keys)
	}
	// Gets are not cut off.
	f.Set(Faults{PartialRate: 1})
	if err := m.Put(ctx, "other", strings.NewReader("y"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx, "other", 0, -1); err != nil {
		t.Fatalf("get under PartialRate: %v", err)
	}
}

// TestFaultyVanish: an object deleted behind the store's back reads as
// ErrNotFound, both by rate and by Vanish.
func TestFaultyVanish(t *testing.T) {
	ctx := context.Background()
	m := &Memory{}
	f := NewFaulty(m, 1)
	for _, k := range []string{"a", "b"} {
		if err := f.Put(ctx, k, strings.NewReader("v"), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Vanish(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx, "a", 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("vanished a: %v", err)
	}
	f.Set(Faults{VanishRate: 1})
	if _, err := f.Get(ctx, "b", 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("vanishing b: %v", err)
	}
	if keys, _ := m.List(ctx, ""); len(keys) != 0 {
		t.Fatalf("still there: %v", keys)
	}
	if c := f.Counts(); c.Vanished != 1 {
		t.Fatalf("counts %+v", c)
	}
}
