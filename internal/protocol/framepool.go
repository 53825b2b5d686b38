package protocol

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Request frames of pooledFrameMin bytes and more (produce requests,
// mostly: franz-go and the Java client send batches of up to 1 MiB) are
// read into buffers from size-classed pools, and a handler that knows
// when it is done with a request's bytes gives them back
// (Request.ReleaseFrame): a broker taking produce requests at disk speed
// then neither allocates nor zeroes a new buffer per request, and its
// garbage collector runs less often. A frame whose handler does not give
// it back is left to the garbage collector, as any other buffer.
const (
	// pooledFrameMin is the smallest pooled frame; smaller ones are
	// allocated, their zeroing being cheap.
	pooledFrameMin = 64 << 10
	// pooledFrameMax is the largest pooled frame (produce requests
	// above it are rare: message.max.bytes is about 1 MiB).
	pooledFrameMax = 16 << 20
)

// Two classes per power of two (2^k and 1.5 * 2^k): a buffer is less than
// 1.5 times its frame.
var (
	framePools [2 * (bits.UintSize + 1)]sync.Pool
	// framesReused counts the frames read into a buffer given back by an
	// earlier request (FramesReused).
	framesReused atomic.Int64
)

// frameClass returns the pool index and buffer size for a frame of n
// bytes (pooledFrameMin <= n <= pooledFrameMax).
func frameClass(n int) (int, int) {
	k := bits.Len(uint(n - 1)) // 2^k >= n > 2^(k-1)
	if half := 3 << (k - 2); n <= half {
		return 2*k - 1, half
	}
	return 2 * k, 1 << k
}

// getFrame returns a buffer of n bytes for a request frame: from a pool
// (its bytes not cleared: the caller reads the frame over all of them)
// and pooled set, or newly allocated.
func getFrame(n int) (b []byte, pooled bool) {
	if n < pooledFrameMin || n > pooledFrameMax {
		return make([]byte, n), false
	}
	i, size := frameClass(n)
	if p, ok := framePools[i].Get().(*[]byte); ok {
		framesReused.Add(1)
		return (*p)[:n], true
	}
	return make([]byte, n, size), true
}

// putFrame gives a buffer from getFrame back to its pool. Nothing may
// read or write it afterwards.
func putFrame(b []byte) {
	n := cap(b)
	if n < pooledFrameMin || n > pooledFrameMax {
		return
	}
	i, size := frameClass(n)
	if size != n {
		return // not a buffer of this pool
	}
	b = b[:n]
	framePools[i].Put(&b)
}

// FramesReused is the number of request frames read so far into a
// buffer an earlier request gave back (Request.ReleaseFrame), in all
// servers of the process.
func FramesReused() int64 { return framesReused.Load() }
