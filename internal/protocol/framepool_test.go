package protocol

import (
	"bufio"
	"bytes"
	"net"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFrameClass(t *testing.T) {
	for n := pooledFrameMin; n <= pooledFrameMax; n += 4093 {
		i, size := frameClass(n)
		if size < n || size > n*3/2 {
			t.Fatalf("frame of %d bytes: buffer of %d", n, size)
		}
		// A buffer of a class maps back to that class.
		if j, s := frameClass(size); j != i || s != size {
			t.Fatalf("buffer of %d bytes: class %d (%d bytes), want %d", size, j, s, i)
		}
	}
	b, pooled := getFrame(pooledFrameMin - 1)
	if pooled || len(b) != pooledFrameMin-1 {
		t.Fatalf("small frame: pooled %v, len %d", pooled, len(b))
	}
	b, pooled = getFrame(pooledFrameMax + 1)
	if pooled || len(b) != pooledFrameMax+1 {
		t.Fatalf("huge frame: pooled %v, len %d", pooled, len(b))
	}
}

// produceFrame encodes a Produce v9 request whose one partition holds
// records (opaque bytes here: the handler below only compares them).
func produceFrame(records []byte, corrID int32) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 1000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = records
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	return frame(req, 9, corrID)
}

// largeProduceServer serves Produce with a handler that checks each
// request's records against want(corrID) from its Await (on the writer
// goroutine, as the produce handler does) and then gives the frame back.
func largeProduceServer(t testing.TB, want func(int32) []byte, bad *atomic.Int32) string {
	reg := NewRegistry()
	reg.Register(Handler{Key: 0, MinVersion: 3, MaxVersion: 12, Serve: func(r *Request) Reply {
		req := r.Body.(*kmsg.ProduceRequest)
		resp := req.ResponseKind()
		return Reply{Await: func() kmsg.Response {
			if !bytes.Equal(req.Topics[0].Partitions[0].Records, want(r.CorrelationID)) {
				bad.Add(1)
			}
			r.ReleaseFrame()
			r.ReleaseFrame() // a second call does nothing
			return resp
		}}
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// At most 8 requests wait on the connection, so the frames in use are
	// bounded however slowly the handlers run on a loaded machine (with the
	// default 100 all 64 could be read before the first is answered).
	s := NewServer(Config{MaxInFlightPerConn: 8}, reg)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// TestLargeFramesReused: 1 MiB produce requests whose handler gives their
// frames back are read into the same few buffers: the server allocates
// far less than a frame per request, and every handler still sees its own
// request's bytes, with several requests in flight on the connection.
func TestLargeFramesReused(t *testing.T) {
	const n, size = 64, 1 << 20
	recs := make([][]byte, n)
	frames := make([][]byte, n)
	for i := range frames {
		recs[i] = bytes.Repeat([]byte{byte(i)}, size)
		recs[i][i] = ^byte(i)
		frames[i] = produceFrame(recs[i], int32(i))
	}
	var bad atomic.Int32
	addr := largeProduceServer(t, func(corr int32) []byte { return recs[corr] }, &bad)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	// Warm the pool, then count the bytes allocated for n requests.
	for i := range 4 {
		c.Write(frames[i])
		readResponse(t, br)
	}
	reused := FramesReused()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range frames {
			if _, err := c.Write(frames[i]); err != nil {
				return
			}
		}
	}()
	for i := range n {
		if corr, _ := readResponse(t, br); corr != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
	}
	<-done
	runtime.ReadMemStats(&after)
	if bad.Load() != 0 {
		t.Fatalf("%d handlers saw other bytes than their request's", bad.Load())
	}
	// The test's own allocations are small; without pooling the server
	// allocates n MiB here (with it, a buffer per request in flight).
	if got := after.TotalAlloc - before.TotalAlloc; got > n*size/2 {
		t.Fatalf("%d MiB allocated for %d requests of 1 MiB", got>>20, n)
	}
	t.Logf("%d MiB allocated for %d requests of 1 MiB, %d frames reused", (after.TotalAlloc-before.TotalAlloc)>>20, n, FramesReused()-reused)
	if FramesReused()-reused < n/4 {
		t.Fatalf("%d of %d frames reused", FramesReused()-reused, n)
	}
}

// BenchmarkLargeProduceFrames is the server's side of 1 MiB produce
// requests on one connection: read, decoded, handed to a handler that
// gives its frame back, answered.
func BenchmarkLargeProduceFrames(b *testing.B) {
	records := bytes.Repeat([]byte{7}, 1<<20)
	fr := produceFrame(records, 0)
	var bad atomic.Int32
	addr := largeProduceServer(b, func(int32) []byte { return records }, &bad)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	b.SetBytes(int64(len(fr)))
	b.ReportAllocs()
	for b.Loop() {
		c.Write(fr)
		readResponse(b, br)
	}
	if bad.Load() != 0 {
		b.Fatal("a handler saw other bytes")
	}
}
