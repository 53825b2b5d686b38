package batch

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Record is one record inside a batch. Key, Value and header slices alias
// the batch (or its decompressed records) and are valid only during the
// callback that received them.
type Record struct {
	OffsetDelta    int32
	TimestampDelta int64
	Key            []byte // nil for a null key
	Value          []byte // nil for a null value
	Headers        []RecordHeader
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// MaxDecompressedSize bounds the decompressed records of one batch, so a
// small compressed batch cannot expand without limit.
const MaxDecompressedSize = 256 << 20

// Records calls fn for every record of one whole stored batch,
// decompressing if needed, until fn returns false. It returns ErrCorrupt if
// the records do not parse, their count differs from the header, or their
// offset deltas are not strictly increasing within the last offset delta.
// Stored batches of a compacted log have gaps in their offset deltas (the
// cleaner keeps the base offset and the last offset delta of a batch whose
// records it removes, as Kafka's MemoryRecords.filterTo does), and may be
// empty; what a producer sends is checked strictly by Validate.
func Records(b []byte, fn func(r Record) bool) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if len(b) != h.Size() {
		return ErrCorrupt
	}
	return records(h, b, nil, false, fn)
}

// records decompresses the records of b (a whole batch with header h) if
// needed and scans them (see scanRecords).
func records(h Header, b []byte, ts *Timestamps, strict bool, fn func(r Record) bool) error {
	data := b[HeaderSize:]
	if c := h.Compression(); c != None {
		buf := getBuf()
		defer putBuf(buf)
		if err := decompress(c, data, buf); err != nil {
			return ErrCorrupt
		}
		data = buf.Bytes()
	}
	return scanRecords(h, data, ts, strict, fn)
}

// scanRecords parses the uncompressed records data of a batch with header
// h, checking them against the header (count, nothing left over, and the
// offset deltas: 0, 1, 2, ... up to the last offset delta when strict, as
// Kafka's LogValidator requires of a produced batch; otherwise strictly
// increasing and within the last offset delta, as in a compacted log); it
// adds every record's timestamp to ts when ts is not nil and calls fn, when
// not nil, for every record until it returns false.
func scanRecords(h Header, data []byte, ts *Timestamps, strict bool, fn func(r Record) bool) error {
	if strict && fn == nil {
		return checkRecords(h, data, ts)
	}
	var r Record
	prev := int32(-1)
	for i := int32(0); i < h.NumRecords; i++ {
		var ok bool
		data, ok = parseRecord(data, &r)
		if !ok || (strict && r.OffsetDelta != i) || r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			return ErrCorrupt
		}
		prev = r.OffsetDelta
		if ts != nil {
			// Wraps like Java's long addition in Kafka's Record.timestamp().
			ts.add(h.BaseTimestamp + r.TimestampDelta)
		}
		if fn != nil && !fn(r) {
			return nil
		}
	}
	if len(data) != 0 || (strict && h.NumRecords > 0 && h.LastOffsetDelta != h.NumRecords-1) {
		return ErrCorrupt
	}
	return nil
}

// Validate checks a batch a client produced: header, exact size, CRC, and
// every record (decompressing if needed).
func Validate(b []byte) (Header, error) {
	return validate(b, nil)
}

// Timestamps summarizes the record timestamps of a batch as a consumer
// sees them (base timestamp + delta; the max timestamp for every record of
// a LogAppendTime batch), for the leader's checks (Kafka's LogValidator):
// the smallest and the largest, leaving out records with NoTimestamp. Any
// is false when every record has NoTimestamp.
type Timestamps struct {
	Min, Max int64
	Any      bool
}

// ValidateTimestamps is Validate that also summarizes the record
// timestamps, in the same single pass over the records. It is what the
// produce path runs before an append.
func ValidateTimestamps(b []byte) (Header, Timestamps, error) {
	var ts Timestamps
	h, err := validate(b, &ts)
	return h, ts, err
}

func validate(b []byte, ts *Timestamps) (Header, error) {
	h, err := checkBatch(b)
	if err != nil {
		return h, err
	}
	return h, records(h, b, recordTimestamps(h, ts), true, nil)
}

// checkBatch checks what Validate checks before the records: the header,
// that b is exactly the batch, the CRC, and that there are records.
func checkBatch(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if len(b) != h.Size() {
		return h, ErrCorrupt
	}
	if err := CheckCRC(b); err != nil {
		return h, err
	}
	if h.NumRecords == 0 {
		return h, ErrCorrupt
	}
	return h, nil
}

// recordTimestamps prepares ts (if not nil) for a batch with header h and
// returns where scanRecords should add the record timestamps: nowhere for
// a LogAppendTime batch, whose every record has the max timestamp.
func recordTimestamps(h Header, ts *Timestamps) *Timestamps {
	if ts == nil {
		return nil
	}
	*ts = Timestamps{}
	if h.LogAppendTime() {
		if h.MaxTimestamp != NoTimestamp {
			*ts = Timestamps{Min: h.MaxTimestamp, Max: h.MaxTimestamp, Any: true}
		}
		return nil
	}
	return ts
}

// add takes record timestamp t into account (NoTimestamp is left out).
func (ts *Timestamps) add(t int64) {
	switch {
	case t == NoTimestamp:
	case !ts.Any:
		*ts = Timestamps{Min: t, Max: t, Any: true}
	case t < ts.Min:
		ts.Min = t
	case t > ts.Max:
		ts.Max = t
	}
}

// checkRecords is scanRecords of a produced batch without a callback
// (strict, fn nil), the leader's validation of every batch it appends: it
// makes the same checks, record by record, reading the varints in place
// without decoding a Record (no header slices, no copies). Kafka's
// LogValidator parses every record of an uncompressed v2 batch the same
// way (DefaultRecord.readFrom through the batch's iterator).
func checkRecords(h Header, data []byte, ts *Timestamps) error {
	p := data
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := fastVarint(p)
		if n <= 0 || length < 0 || length > int64(len(p)-n) {
			return ErrCorrupt
		}
		end := n + int(length)
		tsDelta, ok := checkRecord(p[n:end], i)
		if !ok || i > h.LastOffsetDelta {
			return ErrCorrupt
		}
		p = p[end:]
		if ts != nil {
			// Wraps like Java's long addition in Kafka's Record.timestamp().
			ts.add(h.BaseTimestamp + tsDelta)
		}
	}
	if len(p) != 0 || (h.NumRecords > 0 && h.LastOffsetDelta != h.NumRecords-1) {
		return ErrCorrupt
	}
	return nil
}

// checkRecord checks the body of one record (after its length) as
// parseRecord parses it, with offset delta i, and returns its timestamp
// delta.
func checkRecord(body []byte, i int32) (int64, bool) {
	if len(body) < 1 {
		return 0, false
	}
	body = body[1:] // attributes, unused
	tsDelta, n := fastVarint(body)
	if n <= 0 {
		return 0, false
	}
	body = body[n:]
	offsetDelta, n := fastVarint(body)
	if n <= 0 || offsetDelta != int64(i) {
		return 0, false
	}
	body = body[n:]
	var ok bool
	if body, ok = skipBytes(body, -1); !ok { // key
		return 0, false
	}
	if body, ok = skipBytes(body, -1); !ok { // value
		return 0, false
	}
	nh, n := fastVarint(body)
	if n <= 0 || nh < 0 || nh > int64(len(body)-n) {
		return 0, false
	}
	body = body[n:]
	for range nh {
		if body, ok = skipBytes(body, 0); !ok { // header key, never null
			return 0, false
		}
		if body, ok = skipBytes(body, -1); !ok { // header value
			return 0, false
		}
	}
	return tsDelta, len(body) == 0
}

// skipBytes skips a varint length (-1 = null) and that many bytes, the
// length being at least minLen.
func skipBytes(p []byte, minLen int64) ([]byte, bool) {
	l, n := fastVarint(p)
	if n <= 0 || l < minLen || l > int64(len(p)-n) {
		return nil, false
	}
	return p[n+int(max(l, 0)):], true
}

// fastVarint is binary.Varint with a fast path for varints of one or two
// bytes (the lengths and deltas of records up to 8 KiB).
func fastVarint(p []byte) (int64, int) {
	var u int64
	switch {
	case len(p) >= 1 && p[0] < 0x80:
		u = int64(p[0])
	case len(p) >= 2 && p[1] < 0x80:
		u = int64(p[0]&0x7f) | int64(p[1])<<7
		return u>>1 ^ -(u & 1), 2
	default:
		return binary.Varint(p)
	}
	return u>>1 ^ -(u & 1), 1
}

// parseRecord decodes one record from p into r.
func parseRecord(p []byte, r *Record) ([]byte, bool) {
	length, n := binary.Varint(p)
	if n <= 0 || length < 0 || int64(len(p)-n) < length {
		return nil, false
	}
	body, rest := p[n:n+int(length)], p[n+int(length):]
	if len(body) < 1 {
		return nil, false
	}
	body = body[1:] // attributes, unused
	var ok bool
	var v int64
	if r.TimestampDelta, body, ok = varint(body); !ok {
		return nil, false
	}
	if v, body, ok = varint(body); !ok || v < 0 || v > 1<<31-1 {
		return nil, false
	}
	r.OffsetDelta = int32(v)
	if r.Key, body, ok = bytesField(body); !ok {
		return nil, false
	}
	if r.Value, body, ok = bytesField(body); !ok {
		return nil, false
	}
	var nh int64
	if nh, body, ok = varint(body); !ok || nh < 0 || nh > int64(len(body)) {
		return nil, false
	}
	r.Headers = r.Headers[:0]
	for i := int64(0); i < nh; i++ {
		var k, val []byte
		if k, body, ok = bytesField(body); !ok || k == nil {
			return nil, false
		}
		if val, body, ok = bytesField(body); !ok {
			return nil, false
		}
		r.Headers = append(r.Headers, RecordHeader{Key: string(k), Value: val})
	}
	if len(body) != 0 {
		return nil, false
	}
	return rest, true
}

func varint(p []byte) (int64, []byte, bool) {
	v, n := binary.Varint(p)
	if n <= 0 {
		return 0, nil, false
	}
	return v, p[n:], true
}

// bytesField reads a varint length (-1 = null) and that many bytes.
func bytesField(p []byte) ([]byte, []byte, bool) {
	l, p, ok := varint(p)
	if !ok || l < -1 || l > int64(len(p)) {
		return nil, nil, false
	}
	if l == -1 {
		return nil, p, true
	}
	return p[:l:l], p[l:], true
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuf() *bytes.Buffer { b := bufPool.Get().(*bytes.Buffer); b.Reset(); return b }

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 8<<20 {
		bufPool.Put(b)
	}
}

var (
	zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxDecompressedSize))
	gzipPool   sync.Pool
	lz4Pool    = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
)

// xerialMagic starts snappy data framed by the Java clients (xerial
// snappy-java's stream format: magic, version, compat, then length-prefixed
// raw snappy blocks).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress writes the decompressed records of codec c into out, refusing
// to produce more than MaxDecompressedSize bytes.
func decompress(c Codec, src []byte, out *bytes.Buffer) error {
	switch c {
	case Gzip:
		var zr *gzip.Reader
		if v := gzipPool.Get(); v != nil {
			zr = v.(*gzip.Reader)
			if err := zr.Reset(bytes.NewReader(src)); err != nil {
				return err
			}
		} else {
			var err error
			if zr, err = gzip.NewReader(bytes.NewReader(src)); err != nil {
				return err
			}
		}
		defer gzipPool.Put(zr)
		return copyLimited(out, zr)
	case Snappy:
		if bytes.HasPrefix(src, xerialMagic) && len(src) >= 16 {
			p := src[16:]
			for len(p) > 0 {
				if len(p) < 4 {
					return ErrCorrupt
				}
				n := int(be.Uint32(p))
				p = p[4:]
				if n < 0 || n > len(p) {
					return ErrCorrupt
				}
				if err := snappyBlock(out, p[:n]); err != nil {
					return err
				}
				p = p[n:]
			}
			return nil
		}
		return snappyBlock(out, src)
	case LZ4:
		zr := lz4Pool.Get().(*lz4.Reader)
		defer lz4Pool.Put(zr)
		zr.Reset(bytes.NewReader(src))
		return copyLimited(out, zr)
	case Zstd:
		if zstdDec == nil {
			return ErrCorrupt
		}
		d, err := zstdDec.DecodeAll(src, out.AvailableBuffer())
		if err != nil {
			return err
		}
		if len(d) > MaxDecompressedSize {
			return ErrCorrupt
		}
		out.Write(d)
		return nil
	}
	return ErrCorrupt
}

func snappyBlock(out *bytes.Buffer, src []byte) error {
	n, err := snappy.DecodedLen(src)
	if err != nil || n < 0 || out.Len()+n > MaxDecompressedSize {
		return ErrCorrupt
	}
	out.Grow(n)
	d, err := snappy.Decode(out.AvailableBuffer()[:n], src)
	if err != nil {
		return err
	}
	out.Write(d)
	return nil
}

func copyLimited(out *bytes.Buffer, r io.Reader) error {
	n, err := out.ReadFrom(io.LimitReader(r, MaxDecompressedSize+1))
	if err != nil {
		return err
	}
	if n > MaxDecompressedSize {
		return ErrCorrupt
	}
	return nil
}
