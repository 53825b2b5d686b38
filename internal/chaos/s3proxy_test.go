package chaos

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestS3Proxy: the object store proxy in front of a real S3 server
// forwards when healthy, delays when slow, answers 5xx in the error mode
// (the client's retries see them and give up) and holds requests
// unanswered in an outage until the client's timeout; after the heal the
// same client works again.
func TestS3Proxy(t *testing.T) {
	srv := testproc.StartS3(t)
	p, err := newS3Proxy(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	o := srv.Options()
	o.Endpoint, o.RequestTimeout, o.MaxAttempts, o.MaxBackoff = p.endpoint(), 300*time.Millisecond, 2, 10*time.Millisecond
	s, err := objstore.NewS3(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(key string) error { return s.Put(ctx, key, strings.NewReader("value"), 5) }
	read := func(key string) (string, error) {
		r, err := s.Get(ctx, key, 0, -1)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		return string(b), err
	}

	if err := put("a"); err != nil {
		t.Fatalf("healthy put: %v", err)
	}
	if v, err := read("a"); err != nil || v != "value" {
		t.Fatalf("healthy get: %q %v", v, err)
	}

	p.set(s3Slow, 150*time.Millisecond)
	start := time.Now()
	if _, err := read("a"); err != nil {
		t.Fatalf("slow get: %v", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("slow get took %v", d)
	}

	p.set(s3Errors, 0)
	before := p.failed.Load()
	err = put("b")
	if err == nil || !strings.Contains(err.Error(), "StatusCode: 50") {
		t.Errorf("put in the error mode: %v", err)
	}
	if n := p.failed.Load() - before; n != 2 {
		t.Errorf("%d requests answered 5xx, want 2 (both attempts)", n)
	}

	p.set(s3Outage, 0)
	start = time.Now()
	_, err = read("a")
	if err == nil {
		t.Fatal("get in an outage succeeded")
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Errorf("get in an outage failed after %v, before 2 attempts of 300ms", d)
	}
	if p.held.Load() < 2 {
		t.Errorf("held %d requests", p.held.Load())
	}
	// A request held when the outage heals is cut, not answered.
	done := make(chan error, 1)
	o2 := o
	o2.RequestTimeout, o2.MaxAttempts = 10*time.Second, 1
	s2, _ := objstore.NewS3(o2)
	go func() { done <- s2.Put(ctx, "held", strings.NewReader("x"), 1) }()
	for p.held.Load() < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	p.healAll()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a held put was answered")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a held put still hangs after the heal")
	}
	if _, err := read("held"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("the cut put left an object: %v", err)
	}

	if err := put("c"); err != nil {
		t.Fatalf("put after the heal: %v", err)
	}
	if v, err := read("c"); err != nil || v != "value" {
		t.Fatalf("get after the heal: %q %v", v, err)
	}
}
