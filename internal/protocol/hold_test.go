package protocol

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHoldRequests: a server holding requests (HoldRequests) answers
// ApiVersions at once, runs no other handler until its ready channel is
// closed, and then answers the held request on the same connection.
func TestHoldRequests(t *testing.T) {
	var served atomic.Int32
	reg := NewRegistry()
	reg.Register(Handler{Key: 3, MinVersion: 0, MaxVersion: 11, Serve: func(r *Request) Reply {
		served.Add(1)
		return Reply{Resp: r.Body.ResponseKind()}
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{}, reg)
	ready := make(chan struct{})
	s.HoldRequests(ready)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })

	c := dial(t, ln.Addr().String())
	c.Write(frame(kmsg.NewPtrApiVersionsRequest(), 3, 1))
	if corr, _ := readResponse(t, c); corr != 1 {
		t.Fatalf("ApiVersions answered with correlation id %d", corr)
	}
	c.Write(frame(kmsg.NewPtrMetadataRequest(), 9, 2))
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [1]byte
	if n, err := c.Read(b[:]); n > 0 || err == nil {
		t.Fatal("Metadata answered before the server was ready")
	}
	if served.Load() != 0 {
		t.Fatal("the Metadata handler ran before the server was ready")
	}
	close(ready)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if corr, _ := readResponse(t, c); corr != 2 {
		t.Fatalf("Metadata answered with correlation id %d", corr)
	}
	if served.Load() != 1 {
		t.Fatalf("the Metadata handler ran %d times", served.Load())
	}
}
