package protocol

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialFrom connects to addr from the local IP src (any 127.0.0.0/8
// address is loopback on Linux).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from %s: %v", src, err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// answers reports whether c gets an ApiVersions response (the server
// accepted and counted it) rather than being closed.
func answers(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.Write(frame(kmsg.NewPtrApiVersionsRequest(), 3, 1))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	_, err := c.Read(size[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection neither answered nor closed")
	}
	return err == nil
}

// max.connections.per.ip over real TCP: with a limit of 2 the third
// connection from 127.0.0.1 is closed, an override lets 127.0.0.2 open 3,
// and closing a connection frees its slot.
func TestMaxConnectionsPerIP(t *testing.T) {
	s, addr := startServer(t, Config{MaxConnectionsPerIP: 2,
		MaxConnectionsPerIPOverrides: map[string]int{"127.0.0.2": 3}}, NewRegistry())
	var local []net.Conn
	for i := 0; i < 3; i++ {
		c := dialFrom(t, "127.0.0.1", addr)
		if got := answers(t, c); got != (i < 2) {
			t.Fatalf("127.0.0.1 connection %d served=%v, want %v", i+1, got, i < 2)
		}
		local = append(local, c)
	}
	for i := 0; i < 4; i++ {
		c := dialFrom(t, "127.0.0.2", addr)
		if got := answers(t, c); got != (i < 3) {
			t.Fatalf("127.0.0.2 connection %d served=%v, want %v", i+1, got, i < 3)
		}
	}
	local[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.NumConns() != 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !answers(t, dialFrom(t, "127.0.0.1", addr)) {
		t.Fatal("a closed connection's slot was not freed")
	}
}

// max.connections closes connections over the broker-wide limit.
func TestMaxConnections(t *testing.T) {
	_, addr := startServer(t, Config{MaxConnections: 2}, NewRegistry())
	for i := 0; i < 3; i++ {
		if got := answers(t, dial(t, addr)); got != (i < 2) {
			t.Fatalf("connection %d served=%v, want %v", i+1, got, i < 2)
		}
	}
}

// max.connection.creation.rate (KIP-612) delays accepts: 10 connections
// at 20/s after the first second's 20 take at least ~0.4 s.
func TestMaxConnectionCreationRate(t *testing.T) {
	_, addr := startServer(t, Config{MaxConnectionCreationRate: 20}, NewRegistry())
	for i := 0; i < 20; i++ { // the bucket's first second
		answers(t, dial(t, addr))
	}
	start := time.Now()
	for i := 0; i < 10; i++ {
		if !answers(t, dial(t, addr)) {
			t.Fatal("a delayed connection was closed")
		}
	}
	if el := time.Since(start); el < 350*time.Millisecond {
		t.Fatalf("10 connections over the rate took %v, want >= ~0.5 s", el)
	}
}

func TestParsePerIPOverrides(t *testing.T) {
	m, err := ParsePerIPOverrides("127.0.0.1:5, [::1]:7,")
	if err != nil || m["127.0.0.1"] != 5 || m["::1"] != 7 || len(m) != 2 {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:x", "127.0.0.1:-1", ":3"} {
		if _, err := ParsePerIPOverrides(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
