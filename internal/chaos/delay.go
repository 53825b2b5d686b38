package chaos

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"time"
)

// Kafka API keys the delay fault can hold.
const (
	apiProduce int16 = 0
	apiEndTxn  int16 = 26
)

// maxFrame bounds the Kafka requests the framing pipe buffers (the
// default socket.request.max.bytes is 100 MiB); a larger size prefix is
// not Kafka and the rest of the stream is copied as is.
const maxFrame = 100 << 20

// delayRule holds the requests of one client connection: the first
// connection that sends a request with one of keys to node (0: any node)
// while the rule waits is chosen, and that request and every later one on
// the connection (TCP keeps their order) are held until hold has passed,
// then delivered, even if the client closed the connection meanwhile, as
// a packet delayed in the network still arrives. This is the KAFKA-17754
// class: a Produce held until its transaction ended (the client timed
// out, retried or aborted) lands afterwards, possibly in the next
// transaction of the same producer; an EndTxn held lands after the
// client started its next transaction.
type delayRule struct {
	node  int
	keys  []int16
	hold  time.Duration
	until time.Time // the rule stops waiting for a request then

	chosen  *pconn
	key     int16
	corr    int32
	what    string // the held request, decoded (requestInfo)
	heldAt  time.Time
	release time.Time
	frames  int
	// delivered is the number of held frames written to the broker; late
	// counts those written after the client closed its side.
	delivered, late int
}

// delayReport describes what a delay rule did.
type delayReport struct {
	Matched   bool
	Node      int
	Key       int16
	Corr      int32
	What      string
	HeldAt    time.Time
	Release   time.Time
	Frames    int
	Delivered int
	Late      int
}

// setDelay installs a delay rule (replacing any other).
func (nw *network) setDelay(node int, keys []int16, hold, wait time.Duration) {
	nw.mu.Lock()
	nw.delay = &delayRule{node: node, keys: keys, hold: hold, until: time.Now().Add(wait)}
	nw.mu.Unlock()
}

// clearDelay removes the delay rule and reports what it did. Requests it
// holds are still delivered at their release time.
func (nw *network) clearDelay() delayReport {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	r := nw.delay
	nw.delay = nil
	if r == nil || r.chosen == nil {
		return delayReport{}
	}
	return delayReport{Matched: true, Node: r.node, Key: r.key, Corr: r.corr, What: r.what, HeldAt: r.heldAt, Release: r.release, Frames: r.frames, Delivered: r.delivered, Late: r.late}
}

// delayMatched reports whether the rule chose a connection, and when its
// held requests are released.
func (nw *network) delayMatched() (bool, time.Time) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.delay == nil || nw.delay.chosen == nil {
		return false, time.Time{}
	}
	return true, nw.delay.release
}

// holdUntil returns when a request with key and correlation id corr on
// connection c to p's node may be forwarded (zero: now).
func (nw *network) holdUntil(p *proxy, c *pconn, frame []byte) (time.Time, *delayRule) {
	key := int16(binary.BigEndian.Uint16(frame[4:6]))
	corr := int32(binary.BigEndian.Uint32(frame[8:12]))
	nw.mu.Lock()
	defer nw.mu.Unlock()
	r := nw.delay
	if r == nil {
		return time.Time{}, nil
	}
	now := time.Now()
	if r.chosen == nil && now.Before(r.until) && (r.node == 0 || r.node == p.dst) && slices.Contains(r.keys, key) {
		r.chosen, r.key, r.corr, r.heldAt, r.release = c, key, corr, now, now.Add(r.hold)
		r.node, r.what = p.dst, requestInfo(frame)
		nw.logf("delay-txn: holding %s of a client connection to node %d until %s", r.what, p.dst, r.release.Format("15:04:05.000"))
	}
	if r.chosen != c || !now.Before(r.release) {
		return time.Time{}, nil
	}
	r.frames++
	return r.release, r
}

// delivered records a held frame written to the broker.
func (nw *network) delivered(r *delayRule, late bool) {
	nw.mu.Lock()
	r.delivered++
	if late {
		r.late++
	}
	nw.mu.Unlock()
}

// pipeKafka copies client requests (size-prefixed Kafka frames) from src
// to dst a whole frame at a time, so the delay rule can hold requests by
// API key. It stops forwarding once frozen is set, as pipe does.
func (c *pconn) pipeKafka(dst, src net.Conn, frozen *atomic.Bool, p *proxy) {
	r := bufio.NewReaderSize(src, 64<<10)
	var size [4]byte
	held := false
	defer func() {
		if held {
			// Let the broker read the late requests before the
			// proxy closes its side.
			time.Sleep(2 * time.Second)
		}
	}()
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 8 || n > maxFrame {
			// Not a Kafka request: forward the rest untouched.
			if frozen.Load() {
				c.hold()
				return
			}
			if _, err := dst.Write(size[:]); err != nil {
				return
			}
			c.pipe(dst, readerConn{r, src}, frozen)
			return
		}
		frame := make([]byte, 4+n)
		copy(frame, size[:])
		_, rerr := io.ReadFull(r, frame[4:])
		if rerr != nil {
			return
		}
		until, rule := p.nw.holdUntil(p, c, frame)
		if rule != nil {
			held = true
			time.Sleep(time.Until(until))
		}
		if frozen.Load() {
			c.hold()
			return
		}
		if _, err := dst.Write(frame); err != nil {
			return
		}
		if rule != nil {
			// Has the client given up on the connection (EOF
			// waiting behind the held request)?
			src.SetReadDeadline(time.Now().Add(time.Millisecond))
			_, perr := r.Peek(1)
			src.SetReadDeadline(time.Time{})
			var ne net.Error
			p.nw.delivered(rule, perr != nil && !(errors.As(perr, &ne) && ne.Timeout()))
		}
	}
}

// readerConn reads through a buffered reader of a connection.
type readerConn struct {
	r io.Reader
	net.Conn
}

func (rc readerConn) Read(b []byte) (int, error) { return rc.r.Read(b) }

func (d delayReport) String() string {
	if !d.Matched {
		return "no matching client request arrived"
	}
	return fmt.Sprintf("held %s of a client connection to node %d for %v (%d request(s) held in all); %d delivered, %d after the client had closed the connection",
		d.What, d.Node, d.Release.Sub(d.HeldAt).Round(time.Millisecond), d.Frames, d.Delivered, d.Late)
}

// delayTxn runs a FaultDelayTxn: it waits up to 5 s for a matching client
// request, holds it (and its connection's later requests) for
// delayHold(f), and records what was held and when it was delivered.
func (nm *nemesis) delayTxn(ctx context.Context, f Fault) {
	node, why, keys := 0, "any node", []int16{apiEndTxn}
	if f.Partition%2 == 0 {
		node, why = nm.resolve(ctx, f)
		keys = []int16{apiProduce}
	}
	hold := delayHold(f)
	e := Event{StartMs: nm.h.since(), Kind: FaultDelayTxn}
	nm.c.nw.setDelay(node, keys, hold, 5*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ok, _ := nm.c.nw.delayMatched(); ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok, release := nm.c.nw.delayMatched(); ok {
		// Wait for the delivery (and the peek after it).
		time.Sleep(time.Until(release) + 500*time.Millisecond)
	}
	rep := nm.c.nw.clearDelay()
	if rep.Matched {
		e.Nodes = []int{rep.Node}
		nm.c.node(rep.Node).note("fault: delay-txn: %s", rep)
	}
	e.Detail = fmt.Sprintf("target %s: %s", why, rep)
	e.EndMs = nm.h.since()
	nm.add(e)
}

// requestInfo describes a held request frame (size prefix included):
// API, version, correlation id and, for Produce and EndTxn, the
// transactional id (and EndTxn's producer id, epoch and commit flag), as
// far as the bytes decode.
func requestInfo(frame []byte) string {
	d := kdec{b: frame[4:]}
	key, ver, corr := d.i16(), d.i16(), int32(d.i32())
	name := map[int16]string{apiProduce: "Produce", apiEndTxn: "EndTxn"}[key]
	if name == "" {
		name = fmt.Sprintf("api key %d", key)
	}
	out := fmt.Sprintf("%s v%d (correlation id %d)", name, ver, corr)
	// Request header v1 (client id) and, for flexible versions, v2
	// (tagged fields): Produce v9+, EndTxn v3+.
	flexible := (key == apiProduce && ver >= 9) || (key == apiEndTxn && ver >= 3)
	d.str(false)
	if flexible {
		d.tags()
	}
	switch {
	case key == apiProduce && ver >= 3:
		if id := d.str(flexible); !d.bad && id != "" {
			out += fmt.Sprintf(" of transactional id %q", id)
		}
	case key == apiEndTxn:
		id := d.str(flexible)
		pid, epoch := d.i64(), d.i16()
		c := d.n(1)
		if !d.bad {
			out += fmt.Sprintf(" of transactional id %q, producer id %d, epoch %d, commit %v", id, pid, epoch, c[0] != 0)
		}
	}
	return out
}

// kdec reads big-endian Kafka primitives; bad is set on a short read.
type kdec struct {
	b   []byte
	bad bool
}

func (d *kdec) n(k int) []byte {
	if d.bad || len(d.b) < k {
		d.bad = true
		return nil
	}
	v := d.b[:k]
	d.b = d.b[k:]
	return v
}

func (d *kdec) i16() int16 {
	if v := d.n(2); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (d *kdec) i32() uint32 {
	if v := d.n(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *kdec) i64() int64 {
	if v := d.n(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (d *kdec) uvarint() uint64 {
	if d.bad {
		return 0
	}
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[k:]
	return v
}

// str reads a nullable string: compact (uvarint length + 1) or classic
// (int16 length, -1 null).
func (d *kdec) str(compact bool) string {
	var n int
	if compact {
		n = int(d.uvarint()) - 1
	} else {
		n = int(d.i16())
	}
	if n <= 0 {
		return ""
	}
	return string(d.n(n))
}

// tags skips a tagged-field section.
func (d *kdec) tags() {
	for range d.uvarint() {
		d.uvarint()
		d.n(int(d.uvarint()))
	}
}
