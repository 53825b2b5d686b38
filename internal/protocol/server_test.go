package protocol

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startServer serves reg on a loopback port.
func startServer(t *testing.T, cfg Config, reg *Registry) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(cfg, reg)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

// frame encodes a request with header v1 (v2 when flexible).
func frame(req kmsg.Request, version int16, corrID int32) []byte {
	req.SetVersion(version)
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corrID))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readResponse reads one response frame, returning its correlation id and
// body (after the header).
func readResponse(t testing.TB, r io.Reader) (int32, []byte) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		t.Fatal("read size:", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal("read body:", err)
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:]
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// expectClosed asserts the server closes the connection without answering.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err == nil {
		t.Fatal("connection still open and answering")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection neither answered nor closed")
	}
}

func TestApiVersionsDerivedFromRegistry(t *testing.T) {
	reg := NewRegistry()
	reg.Register(Handler{Key: 3, MinVersion: 0, MaxVersion: 11, Serve: func(*Request) Reply { return Reply{} }})
	_, addr := startServer(t, Config{}, reg)
	for _, v := range []int16{0, 1, 2, 3} {
		c := dial(t, addr)
		c.Write(frame(kmsg.NewPtrApiVersionsRequest(), v, 77))
		corr, body := readResponse(t, c)
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(v)
		if err := resp.ReadFrom(body); err != nil || corr != 77 {
			t.Fatalf("v%d: %v corr=%d", v, err, corr)
		}
		// Metadata, and SaslHandshake, ApiVersions, SaslAuthenticate,
		// which every registry serves (sasl.go).
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != 4 || resp.ApiKeys[0].ApiKey != 3 || resp.ApiKeys[1].ApiKey != 17 ||
			resp.ApiKeys[2].ApiKey != 18 || resp.ApiKeys[3].ApiKey != 36 {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
}

func TestApiVersionsUnsupportedVersionFallsBackToV0(t *testing.T) {
	_, addr := startServer(t, Config{}, NewRegistry())
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	// Version 9 does not exist; the client cannot know our body format, so
	// the answer is a v0 response with UNSUPPORTED_VERSION (KIP-511).
	b := frame(req, 3, 5)
	binary.BigEndian.PutUint16(b[6:], 9)
	c.Write(b)
	corr, body := readResponse(t, c)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil || corr != 5 {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("%+v", resp)
	}
}

func TestPipelinedResponsesInOrder(t *testing.T) {
	reg := NewRegistry()
	var n atomic.Int32
	reg.Register(Handler{Key: 3, MinVersion: 0, MaxVersion: 11, Serve: func(r *Request) Reply {
		i := n.Add(1)
		resp := r.Body.ResponseKind()
		if i%2 == 1 {
			// Odd requests finish late; their successors must still wait.
			return Reply{Await: func() kmsg.Response { time.Sleep(20 * time.Millisecond); return resp }}
		}
		return Reply{Resp: resp}
	}})
	_, addr := startServer(t, Config{}, reg)
	c := dial(t, addr)
	for i := int32(0); i < 20; i++ {
		c.Write(frame(kmsg.NewPtrMetadataRequest(), 4, i))
	}
	br := bufio.NewReader(c)
	for i := int32(0); i < 20; i++ {
		corr, _ := readResponse(t, br)
		if corr != i {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
	}
}

func TestBadFramesCloseTheConnection(t *testing.T) {
	reg := NewRegistry()
	reg.Register(Handler{Key: 3, MinVersion: 0, MaxVersion: 11, Serve: func(r *Request) Reply { return Reply{Resp: r.Body.ResponseKind()} }})
	_, addr := startServer(t, Config{MaxRequestBytes: 1 << 20}, reg)
	cases := map[string][]byte{
		"negative length":    {0x80, 0, 0, 0},
		"huge length":        {0x7f, 0xff, 0xff, 0xff},
		"over the limit":     binary.BigEndian.AppendUint32(nil, 1<<20+1),
		"too short":          {0, 0, 0, 3, 0, 3, 0},
		"unknown key":        frameWithKey(1000, 0),
		"impossible version": frameWithKey(3, 99),
		"truncated body":     truncatedMetadata(),
		"bad client id":      {0, 0, 0, 10, 0, 3, 0, 4, 0, 0, 0, 1, 0x7f, 0xff},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			c.Write(b)
			expectClosed(t, c)
		})
	}
	// The server keeps serving others.
	c := dial(t, addr)
	c.Write(frame(kmsg.NewPtrApiVersionsRequest(), 3, 1))
	if corr, _ := readResponse(t, c); corr != 1 {
		t.Fatal("server stopped serving after bad input")
	}
}

func frameWithKey(key, version int16) []byte {
	b := frame(kmsg.NewPtrMetadataRequest(), 4, 1)
	binary.BigEndian.PutUint16(b[4:], uint16(key))
	binary.BigEndian.PutUint16(b[6:], uint16(version))
	return b
}

func truncatedMetadata() []byte {
	req := kmsg.NewPtrMetadataRequest()
	topic := "some-topic"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	b := frame(req, 4, 1)
	b = b[:len(b)-5]
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	reg := NewRegistry()
	reg.Register(Handler{Key: 3, MinVersion: 0, MaxVersion: 11, Serve: func(r *Request) Reply { panic("boom") }})
	_, addr := startServer(t, Config{}, reg)
	c := dial(t, addr)
	c.Write(frame(kmsg.NewPtrMetadataRequest(), 4, 1))
	expectClosed(t, c)
	c2 := dial(t, addr)
	c2.Write(frame(kmsg.NewPtrApiVersionsRequest(), 3, 2))
	if corr, _ := readResponse(t, c2); corr != 2 {
		t.Fatal("server stopped serving after a handler panic")
	}
}

func TestNoResponseAndClose(t *testing.T) {
	reg := NewRegistry()
	reg.Register(Handler{Key: 0, MinVersion: 3, MaxVersion: 9, Serve: func(r *Request) Reply {
		return Reply{NoResponse: true, Close: r.CorrelationID == 2}
	}})
	_, addr := startServer(t, Config{}, reg)
	c := dial(t, addr)
	c.Write(frame(kmsg.NewPtrProduceRequest(), 7, 1))
	c.Write(frame(kmsg.NewPtrApiVersionsRequest(), 3, 9))
	if corr, _ := readResponse(t, c); corr != 9 {
		t.Fatalf("acks=0 request must get no response; got corr %d", corr)
	}
	c.Write(frame(kmsg.NewPtrProduceRequest(), 7, 2))
	expectClosed(t, c)
}

func FuzzRequest(f *testing.F) {
	reg := NewRegistry()
	reg.Register(Handler{Key: 3, MinVersion: 0, MaxVersion: 11, Serve: func(r *Request) Reply { return Reply{Resp: r.Body.ResponseKind()} }})
	reg.Register(Handler{Key: 1, MinVersion: 4, MaxVersion: 12, Serve: func(r *Request) Reply { return Reply{Resp: r.Body.ResponseKind()} }})
	srv := NewServer(Config{}, reg)
	conn := &Conn{srv: srv, Values: map[string]any{}}
	f.Add(frame(kmsg.NewPtrMetadataRequest(), 4, 1)[4:])
	f.Add(frame(kmsg.NewPtrApiVersionsRequest(), 3, 1)[4:])
	f.Add(frame(kmsg.NewPtrFetchRequest(), 12, 1)[4:])
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 8 {
			return
		}
		p, err := conn.handle(b, false)
		if err != nil {
			return
		}
		if p.reply.Resp != nil {
			p.reply.Resp.SetVersion(p.version)
			p.reply.Resp.AppendTo(nil)
		}
	})
}

// A client that goes away while a response waits behind a slow one makes
// every later write fail; the writer must stop cleanly (this once closed a
// channel twice and crashed the broker).
func TestWriteFailuresAfterClientLeaves(t *testing.T) {
	reg := NewRegistry()
	reg.Register(Handler{Key: 3, MinVersion: 0, MaxVersion: 11, Serve: func(r *Request) Reply {
		resp := r.Body.ResponseKind()
		if r.CorrelationID%2 == 0 {
			return Reply{Await: func() kmsg.Response { time.Sleep(20 * time.Millisecond); return resp }}
		}
		return Reply{Resp: resp}
	}})
	srv := NewServer(Config{}, reg)
	for round := 0; round < 20; round++ {
		client, server := net.Pipe()
		c := newConn(srv, server, &Listener{})
		done := make(chan struct{})
		go func() { defer close(done); c.serve() }()
		go func() {
			for i := int32(1); i <= 6; i++ {
				client.Write(frame(kmsg.NewPtrMetadataRequest(), 4, i))
			}
			client.Close() // leave without reading a single response
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("connection goroutines did not finish after the client left")
		}
	}
}
