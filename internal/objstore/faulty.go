package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrInjected is wrapped by every error a Faulty store makes up (a 5xx
// answer, an outage, a partial upload), so that tests tell them from real
// ones.
var ErrInjected = errors.New("objstore: injected fault")

// Faults are the faults a Faulty store injects. The zero value injects
// none. Rates are probabilities in [0, 1], drawn per operation from the
// store's seeded generator.
type Faults struct {
	// Latency is added before every operation, plus a uniform draw in
	// [0, Jitter).
	Latency, Jitter time.Duration
	// ErrorRate is the share of operations that fail with a 5xx-like
	// error (500 InternalError or 503 SlowDown) without reaching the
	// store.
	ErrorRate float64
	// TimeoutRate is the share of operations that hang until their
	// context is done and return its error (a store that accepted the
	// connection and never answered).
	TimeoutRate float64
	// PartialRate is the share of Puts that read part of their body and
	// then fail, leaving nothing visible (an upload cut off mid-way).
	PartialRate float64
	// VanishRate is the share of Gets that find their object deleted
	// behind the store's back: it is deleted, and the Get answers
	// ErrNotFound.
	VanishRate float64
	// Outage makes every operation fail at once with a 503-like error
	// until it is cleared.
	Outage bool
}

// Faulty wraps a Store with seeded, switchable faults for in-process tests
// and the simulator (the chaos harness troubles a real S3 server through
// an HTTP proxy instead: internal/chaos/s3proxy.go). Safe for concurrent
// use; Set changes the faults of operations that start afterwards.
type Faulty struct {
	inner Store

	mu     sync.Mutex
	rng    *rand.Rand
	faults Faults
	counts FaultCounts
}

// FaultCounts counts the faults a Faulty store injected.
type FaultCounts struct {
	Errors, Timeouts, Partials, Vanished, Outages int
}

// NewFaulty wraps inner; seed fixes the sequence of draws.
func NewFaulty(inner Store, seed uint64) *Faulty {
	return &Faulty{inner: inner, rng: rand.New(rand.NewPCG(seed, 0x0b5))}
}

// Set replaces the injected faults.
func (f *Faulty) Set(fs Faults) {
	f.mu.Lock()
	f.faults = fs
	f.mu.Unlock()
}

// SetOutage turns the outage on or off, keeping the other faults.
func (f *Faulty) SetOutage(on bool) {
	f.mu.Lock()
	f.faults.Outage = on
	f.mu.Unlock()
}

// Counts returns how many faults were injected so far.
func (f *Faulty) Counts() FaultCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts
}

// Vanish deletes key from the wrapped store behind the user's back (an
// operator's or a lifecycle rule's delete): later Gets answer ErrNotFound.
func (f *Faulty) Vanish(ctx context.Context, key string) error {
	return f.inner.Delete(ctx, key)
}

// fault is one operation's drawn fate.
type fault int

const (
	fNone fault = iota
	fOutage
	fError
	fTimeout
	fPartial
	fVanish
)

// draw decides an operation's fault and delay. Every rate is drawn on
// every call so that the sequence depends only on the seed and the order
// of calls.
func (f *Faulty) draw(put, get bool) (fault, time.Duration, float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := f.faults
	delay := fs.Latency
	if fs.Jitter > 0 {
		delay += time.Duration(f.rng.Int64N(int64(fs.Jitter)))
	}
	e, t, p, v, frac := f.rng.Float64(), f.rng.Float64(), f.rng.Float64(), f.rng.Float64(), f.rng.Float64()
	switch {
	case fs.Outage:
		f.counts.Outages++
		return fOutage, delay, frac
	case e < fs.ErrorRate:
		f.counts.Errors++
		return fError, delay, frac
	case t < fs.TimeoutRate:
		f.counts.Timeouts++
		return fTimeout, delay, frac
	case put && p < fs.PartialRate:
		f.counts.Partials++
		return fPartial, delay, frac
	case get && v < fs.VanishRate:
		f.counts.Vanished++
		return fVanish, delay, frac
	}
	return fNone, delay, frac
}

// begin waits out the delay and applies the faults that need no body:
// a non-nil error ends the operation.
func (f *Faulty) begin(ctx context.Context, op, key string, put, get bool) (fault, float64, error) {
	ft, delay, frac := f.draw(put, get)
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ft, frac, ctx.Err()
		}
	}
	switch ft {
	case fOutage:
		return ft, frac, fmt.Errorf("objstore: %s %s: 503 ServiceUnavailable (outage): %w", op, key, ErrInjected)
	case fError:
		code := "500 InternalError"
		if frac < 0.5 {
			code = "503 SlowDown"
		}
		return ft, frac, fmt.Errorf("objstore: %s %s: %s: %w", op, key, code, ErrInjected)
	case fTimeout:
		<-ctx.Done()
		return ft, frac, ctx.Err()
	}
	return ft, frac, ctx.Err()
}

// Put implements Store.
func (f *Faulty) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	ft, frac, err := f.begin(ctx, "put", key, true, false)
	if err != nil {
		return err
	}
	if ft == fPartial {
		// Consume part of the body, as a connection cut mid-upload
		// does, and leave nothing behind: S3's PUT is all or nothing.
		n, _ := io.CopyN(io.Discard, body, int64(frac*float64(size)))
		return fmt.Errorf("objstore: put %s: connection reset after %d of %d bytes: %w", key, n, size, ErrInjected)
	}
	return f.inner.Put(ctx, key, body, size)
}

// Get implements Store.
func (f *Faulty) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	ft, _, err := f.begin(ctx, "get", key, false, true)
	if err != nil {
		return nil, err
	}
	if ft == fVanish {
		if err := f.inner.Delete(ctx, key); err != nil {
			return nil, err
		}
	}
	return f.inner.Get(ctx, key, off, n)
}

// Delete implements Store.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	if _, _, err := f.begin(ctx, "delete", key, false, false); err != nil {
		return err
	}
	return f.inner.Delete(ctx, key)
}

// List implements Store.
func (f *Faulty) List(ctx context.Context, prefix string) ([]string, error) {
	if _, _, err := f.begin(ctx, "list", prefix, false, false); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, prefix)
}
