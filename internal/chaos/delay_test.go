package chaos

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// kframe is a Kafka request frame with api key key and correlation id corr.
func kframe(key int16, corr int32, body string) []byte {
	b := make([]byte, 12, 12+len(body))
	binary.BigEndian.PutUint32(b, uint32(8+len(body)))
	binary.BigEndian.PutUint16(b[4:], uint16(key))
	binary.BigEndian.PutUint32(b[8:], uint32(corr))
	return append(b, body...)
}

// The delay rule holds the first matching request of one client
// connection, and the requests after it, then delivers them in order;
// other connections and requests before the match flow.
func TestDelayHoldsOneConnection(t *testing.T) {
	addr, conns := backend(t)
	nw, p := newTestProxy(t, addr)
	c1, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	b1 := <-conns
	c1.Write(kframe(3, 1, "meta"))
	if !arrives(b1, string(kframe(3, 1, "meta")), time.Second) {
		t.Fatal("request before the rule did not arrive")
	}
	nw.setDelay(0, []int16{apiProduce}, 800*time.Millisecond, 5*time.Second)
	c1.Write(kframe(3, 2, "meta"))
	if !arrives(b1, string(kframe(3, 2, "meta")), time.Second) {
		t.Fatal("a request of another kind was held")
	}
	t0 := time.Now()
	c1.Write(kframe(apiProduce, 3, "produce"))
	c1.Write(kframe(3, 4, "meta-after"))
	// The proxy must have chosen c1 before c2's Produce is sent, or the
	// rule could choose c2's.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		if ok, _ := nw.delayMatched(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first connection's Produce was never held")
		}
	}
	// The request behind it waits too (TCP order), but is read after the
	// release, so it counts as forwarded, not held.
	// Another connection's Produce is not held: one connection is chosen.
	c2, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	b2 := <-conns
	c2.Write(kframe(apiProduce, 1, "other"))
	if !arrives(b2, string(kframe(apiProduce, 1, "other")), 500*time.Millisecond) {
		t.Fatal("a second connection was held too")
	}
	if !arrives(b1, string(kframe(apiProduce, 3, "produce"))+string(kframe(3, 4, "meta-after")), 3*time.Second) {
		t.Fatal("held requests never delivered in order")
	}
	if d := time.Since(t0); d < 700*time.Millisecond {
		t.Fatalf("delivered after %v, want the 800ms hold", d)
	}
	time.Sleep(50 * time.Millisecond)
	rep := nw.clearDelay()
	if !rep.Matched || rep.Key != apiProduce || rep.Corr != 3 || rep.Frames != 1 || rep.Delivered != 1 || rep.Late != 0 {
		t.Fatalf("report %+v", rep)
	}
}

// A held request is delivered even when the client gave up on the
// connection meanwhile, like a delayed packet (KAFKA-17754).
func TestDelayDeliversAfterClientLeft(t *testing.T) {
	addr, conns := backend(t)
	nw, p := newTestProxy(t, addr)
	nw.setDelay(1, []int16{apiEndTxn}, 500*time.Millisecond, 5*time.Second)
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	b := <-conns
	c.Write(kframe(apiEndTxn, 9, "endtxn"))
	time.Sleep(100 * time.Millisecond)
	c.Close()
	if !arrives(b, string(kframe(apiEndTxn, 9, "endtxn")), 3*time.Second) {
		t.Fatal("held request lost when the client closed")
	}
	b.SetReadDeadline(time.Now().Add(4 * time.Second))
	io.Copy(io.Discard, b) // the proxy closes its side after a grace period
	if rep := nw.clearDelay(); rep.Delivered != 1 || rep.Late != 1 {
		t.Fatalf("report %+v", rep)
	}
}

// Bytes that are not Kafka frames still pass through the framing pipe.
func TestFramingPipePassesOtherBytes(t *testing.T) {
	addr, conns := backend(t)
	_, p := newTestProxy(t, addr)
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := <-conns
	c.Write([]byte("\xff\xff\xff\xffnot kafka"))
	if !arrives(b, "\xff\xff\xff\xffnot kafka", time.Second) {
		t.Fatal("non-Kafka bytes not forwarded")
	}
}

// requestInfo decodes the transactional fields of held requests.
func TestRequestInfo(t *testing.T) {
	// EndTxn v4 (flexible): header client id "c" and no tags, then
	// compact transactional id "tx", producer id 7, epoch 3, commit.
	b := kframe(apiEndTxn, 5, "")
	binary.BigEndian.PutUint16(b[6:], 4)
	b = append(b, 0, 1, 'c', 0, 3, 't', 'x')
	b = binary.BigEndian.AppendUint64(b, 7)
	b = append(b, 0, 3, 1, 0)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	want := `EndTxn v4 (correlation id 5) of transactional id "tx", producer id 7, epoch 3, commit true`
	if got := requestInfo(b); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	// Produce v7 (classic strings): transactional id "tx".
	b = kframe(apiProduce, 6, "")
	binary.BigEndian.PutUint16(b[6:], 7)
	b = append(b, 0, 1, 'c', 0, 2, 't', 'x', 255, 255)
	if got := requestInfo(b); got != `Produce v7 (correlation id 6) of transactional id "tx"` {
		t.Fatalf("got %s", got)
	}
	if got := requestInfo(kframe(3, 1, "")); got != "api key 3 v0 (correlation id 1)" {
		t.Fatalf("got %s", got)
	}
}
