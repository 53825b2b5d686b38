package protocol

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientCancelledMidRequest: a request whose context ends while the
// peer holds the answer fails with the context's error and leaves the
// client usable. The cancellation callback once read the connection
// field after the failed exchange had cleared it (a nil dereference that
// killed a broker under faults); the race detector sees that read too.
func TestClientCancelledMidRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, c) // reads requests, never answers
		}
	}()
	c := NewClient(ln.Addr().String(), "test")
	defer c.Close()
	for i := range 300 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%3)*time.Millisecond+100*time.Microsecond)
		_, err := c.Request(ctx, kmsg.NewPtrApiVersionsRequest())
		cancel()
		if err == nil {
			t.Fatal("a request the peer never answered succeeded")
		}
	}
}
