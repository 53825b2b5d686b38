package chaos

import (
	"io"
	"net"
	"testing"
	"time"
)

// backend accepts connections and hands them to the test.
func backend(t *testing.T) (string, chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			ch <- c
		}
	}()
	return ln.Addr().String(), ch
}

// arrives reports whether msg is read from c within d.
func arrives(c net.Conn, msg string, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return err == nil && string(buf) == msg
}

func newTestProxy(t *testing.T, addr string) (*network, *proxy) {
	t.Helper()
	nw := newNetwork(func() map[int]int { return map[int]int{} }, t.Logf)
	p, err := nw.newProxy("kafka", 1, "127.0.0.1:0", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return nw, p
}

// onlySource is the source of the proxy's one connection.
func onlySource(p *proxy) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		return c.src
	}
	return -9
}

// held is the number of reads p's connections took in a frozen direction
// and never forwarded (pconn.hold).
func held(p *proxy) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for c := range p.conns {
		n += c.held.Load()
	}
	return n
}

// waitFor polls cond (for an event that does happen) for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// lost fails the test unless what was just written towards c is held by
// the proxy: its held count passes was. A held read is never forwarded,
// so c cannot receive it later; nothing has reached c by then either.
func lost(t *testing.T, p *proxy, was int64, c net.Conn, what string) {
	t.Helper()
	waitFor(t, what+" held by the proxy", func() bool { return held(p) > was })
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	if n, _ := c.Read(make([]byte, 16)); n > 0 {
		t.Fatalf("%s delivered across a drop", what)
	}
}

func dialProxy(t *testing.T, p *proxy, accepted chan net.Conn) (client, server net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	select {
	case s := <-accepted:
		return c, s
	case <-time.After(5 * time.Second):
		t.Fatal("proxy did not connect to the backend")
		return nil, nil
	}
}

// A one-way drop loses one direction of a live connection and keeps the
// other; healing closes the connection.
func TestProxyOneWay(t *testing.T) {
	addr, accepted := backend(t)
	nw, p := newTestProxy(t, addr)
	client, server := dialProxy(t, p, accepted)
	if src := onlySource(p); src != srcClient {
		t.Fatalf("connection source identified as %d, want the harness (%d)", src, srcClient)
	}
	client.Write([]byte("ping"))
	if !arrives(server, "ping", 2*time.Second) {
		t.Fatal("no traffic before the fault")
	}

	nw.drop(1, srcClient) // the node's bytes to the clients are lost
	client.Write([]byte("req1"))
	if !arrives(server, "req1", 2*time.Second) {
		t.Fatal("request direction blocked by a drop of the response direction")
	}
	was := held(p)
	server.Write([]byte("resp"))
	lost(t, p, was, client, "a response across a one-way drop")

	// A new connection is held: the backend never sees it. The proxy
	// counts it frozen once it has chosen to hold it, and a held
	// connection is never dialed through.
	frozen := p.frozenTotal.Load()
	c2, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	waitFor(t, "the new connection held", func() bool {
		select {
		case <-accepted:
			t.Fatal("new connection forwarded across a drop")
		default:
		}
		return p.frozenTotal.Load() > frozen
	})
	select {
	case <-accepted:
		t.Fatal("new connection forwarded across a drop")
	default:
	}

	nw.healAll()
	client.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadAll(client); err != nil {
		t.Fatalf("healed connection not closed: %v", err)
	}
	dialProxy(t, p, accepted) // new connections flow again
}

// The opposite drop: requests are lost, responses on the live connection
// still flow.
func TestProxyOneWayRequests(t *testing.T) {
	addr, accepted := backend(t)
	nw, p := newTestProxy(t, addr)
	client, server := dialProxy(t, p, accepted)
	nw.drop(srcClient, 1)
	was := held(p)
	client.Write([]byte("lost"))
	lost(t, p, was, server, "a request across a one-way drop")
	server.Write([]byte("push"))
	if !arrives(client, "push", 2*time.Second) {
		t.Fatal("backend -> client blocked by a drop of client -> backend")
	}
	nw.dropMany(nw.isolation(1))
	was = held(p)
	server.Write([]byte("gone"))
	lost(t, p, was, client, "a response across an isolation")
}
