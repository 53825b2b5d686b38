package protocol

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// oneShotServer answers the first request of every connection on ln with
// an empty Fetch v11 response and then closes the connection, as a peer
// that restarted after answering does; served counts the connections
// whose request it answered, closed is signalled after each close.
func oneShotServer(ln net.Listener, served *atomic.Int32, closed chan<- struct{}) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { c.Close(); closed <- struct{}{} }()
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return
			}
			req := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(c, req); err != nil {
				return
			}
			resp := kmsg.NewFetchResponse()
			resp.SetVersion(11)
			frame := append([]byte{0, 0, 0, 0}, req[4:8]...)
			frame = resp.AppendTo(frame)
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			served.Add(1)
			c.Write(frame)
		}()
	}
}

// TestClientRetriesReadOnStaleConnection: a read (Fetch) whose reused
// connection the peer closed meanwhile (a restart) is sent again at once
// on a new connection and answered, instead of failing once with EOF; a
// request that writes (Produce) is not sent twice.
func TestClientRetriesReadOnStaleConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var served atomic.Int32
	closed := make(chan struct{}, 16)
	go oneShotServer(ln, &served, closed)
	c := NewClient(ln.Addr().String(), "test")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fetch := func() error {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(11)
		_, err := c.Request(ctx, req)
		return err
	}
	if err := fetch(); err != nil {
		t.Fatal(err)
	}
	<-closed // the peer "restarted"
	if err := fetch(); err != nil {
		t.Fatalf("a fetch on the connection the peer closed failed: %v", err)
	}
	if n := served.Load(); n != 2 {
		t.Fatalf("%d fetches answered, want 2", n)
	}
	<-closed
	prod := kmsg.NewPtrProduceRequest()
	prod.SetVersion(9)
	if _, err := c.Request(ctx, prod); err == nil {
		t.Fatal("a produce on the connection the peer closed succeeded: it was sent again")
	}
	if n := served.Load(); n != 2 {
		t.Fatalf("%d requests answered, want 2: the produce was sent again", n)
	}
}
