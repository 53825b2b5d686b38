package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
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

// fetchServer answers every request on ln with a Fetch v11 response whose
// one partition holds the next of records (a fake leader).
func fetchServer(t *testing.T, ln net.Listener, records [][]byte) {
	t.Helper()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for _, recs := range records {
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
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = "t"
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.RecordBatches = recs
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			frame := append([]byte{0, 0, 0, 0}, req[4:8]...) // size, correlation id
			frame = resp.AppendTo(frame)
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			if _, err := c.Write(frame); err != nil {
				return
			}
		}
	}()
}

// TestClientRequestReusing: RequestReusing reads each response into the
// buffer of the previous one (a follower fetcher's rounds allocate
// nothing once its buffer is large enough), grows it for a larger
// response, and leaves the responses of Request alone.
func TestClientRequestReusing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fill := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	fetchServer(t, ln, [][]byte{fill('a', 1000), fill('b', 1000), fill('c', 1000), fill('d', 500), fill('e', 5000)})
	c := NewClient(ln.Addr().String(), "test")
	defer c.Close()
	records := func(reuse bool) []byte {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(11)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		request := c.Request
		if reuse {
			request = c.RequestReusing
		}
		resp, err := request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches
	}
	a := records(true)
	if !bytes.Equal(a, fill('a', 1000)) {
		t.Fatal("first answer's records differ")
	}
	b := records(true)
	if !bytes.Equal(b, fill('b', 1000)) {
		t.Fatal("second answer's records differ")
	}
	if &a[0] != &b[0] || a[0] != 'b' {
		t.Fatal("the second answer was not read into the first one's buffer")
	}
	cc := records(false)
	if !bytes.Equal(cc, fill('c', 1000)) || &cc[0] == &b[0] || !bytes.Equal(b, fill('b', 1000)) {
		t.Fatal("Request's answer shared RequestReusing's buffer")
	}
	d := records(true)
	if !bytes.Equal(d, fill('d', 500)) || &d[0] != &b[0] {
		t.Fatal("a smaller answer was not read into the kept buffer")
	}
	e := records(true)
	if !bytes.Equal(e, fill('e', 5000)) {
		t.Fatal("a larger answer's records differ")
	}
}
