package handler

// Zero-copy Fetch responses. A partition read of at least spliceMin bytes
// is not copied into the response: the response carries a unique marker in
// its RecordBatches, and the connection writer (protocol.Spliced) sends
// the encoded response around the log's byte ranges, which go from the
// page cache to the socket with sendfile(2). Smaller reads are copied: a
// sendfile per partition costs more than copying a few KiB. This is the
// path Kafka's FileRecords.writeTo takes (transferTo).

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/storage"
)

// spliceMin is the smallest partition read that is spliced.
const spliceMin = 32 << 10

// fetchHole is one spliced partition read.
type fetchHole struct {
	marker  [protocol.MarkerLen]byte
	slice   storage.Slice
	records int64 // offsets spanned, for the per-topic counters
}

// markerPrefix makes this process's markers unlikely to occur in any
// encoded response by chance; markerSeq makes each unique.
var (
	markerPrefix = func() (p [8]byte) {
		rand.Read(p[:])
		return p
	}()
	markerSeq atomic.Uint64
)

func newMarker() (m [protocol.MarkerLen]byte) {
	copy(m[:8], markerPrefix[:])
	binary.BigEndian.PutUint64(m[8:], markerSeq.Add(1))
	return m
}

// findHole returns the hole whose marker data is, if any.
func findHole(holes []fetchHole, data []byte) *fetchHole {
	if len(data) != protocol.MarkerLen || !bytes.Equal(data[:8], markerPrefix[:]) {
		return nil
	}
	for i := range holes {
		if bytes.Equal(holes[i].marker[:], data) {
			return &holes[i]
		}
	}
	return nil
}

// splicedFetch is a Fetch response whose large record sets are sent from
// the log files.
type splicedFetch struct {
	*kmsg.FetchResponse
	splices []protocol.Splice
}

// Splices implements protocol.Spliced.
func (r *splicedFetch) Splices() []protocol.Splice { return r.splices }

// respond adds the leaders' endpoints (KIP-951) to a finished Fetch
// response, counts it, and wraps it for splicing if it has holes.
func (h *Handlers) respond(r *protocol.Request, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, holes []fetchHole) kmsg.Response {
	h.addEndpoints(r, resp)
	h.countFetch(req, resp, holes)
	if id, _ := replicaOf(req); id >= 0 && req.Version >= 12 {
		// Its Unflushed tags are honoured: it may pipeline.
		broker.SetCountsFlushedTag(resp)
	}
	if len(holes) == 0 {
		return resp
	}
	sf := &splicedFetch{FetchResponse: resp, splices: make([]protocol.Splice, len(holes))}
	for i, ho := range holes {
		sf.splices[i] = protocol.Splice{Marker: ho.marker, Len: ho.slice.Size, Data: ho.slice}
		metrics.FetchSplicedBytes.Add(float64(ho.slice.Size))
	}
	return sf
}
