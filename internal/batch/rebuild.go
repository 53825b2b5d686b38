package batch

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ErrCodec reports a target codec that is not one of None, Gzip, Snappy,
// LZ4 and Zstd.
var ErrCodec = errors.New("batch: unknown compression codec")

// TooLargeError reports a rebuilt batch larger than the limit given to
// Rebuild.
type TooLargeError struct {
	Size, Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("batch: rebuilt batch of %d bytes exceeds %d", e.Size, e.Limit)
}

// Rebuild returns a copy of b, one whole v2 batch, whose records are
// compressed with codec c, as Kafka's leader rebuilds a batch when the
// topic's compression.type differs from the producer's codec
// (LogValidator.buildRecordsAndAssignOffsets). Everything but the codec is
// kept: base offset, partition leader epoch, producer id and epoch, base
// sequence, transactional and control bits, timestamp type, base and max
// timestamps, record count and last offset delta, and every record's
// bytes (attributes, timestamp and offset deltas, key, value, headers),
// since the uncompressed records are the same bytes whatever the codec.
// Only the length, the attributes' codec bits and the CRC are new.
//
// b is first validated as ValidateTimestamps does (header, exact size,
// CRC, records; decompression bounded by MaxDecompressedSize), so corrupt
// bytes are never turned into a valid batch; then check, if not nil, is
// called with the header and the record timestamps, and an error from it
// is returned as is, before anything is encoded. A rebuilt batch larger
// than limit bytes (if limit > 0) is a *TooLargeError, found before the
// batch is allocated. b is not modified. The returned header is the new
// batch's. Rebuild always encodes, even when c is b's codec: callers that
// keep matching batches as they are compare codecs first.
func Rebuild(b []byte, c Codec, limit int, check func(Header, Timestamps) error) ([]byte, Header, Timestamps, error) {
	var ts Timestamps
	if c < None || c > Zstd {
		return nil, Header{}, ts, ErrCodec
	}
	h, err := checkBatch(b)
	if err != nil {
		return nil, h, ts, err
	}
	data := b[HeaderSize:]
	if src := h.Compression(); src != None {
		buf := getBuf()
		defer putBuf(buf)
		if err := decompress(src, data, buf); err != nil {
			return nil, h, ts, ErrCorrupt
		}
		data = buf.Bytes()
	}
	if err := scanRecords(h, data, recordTimestamps(h, &ts), true, nil); err != nil {
		return nil, h, ts, err
	}
	if check != nil {
		if err := check(h, ts); err != nil {
			return nil, h, ts, err
		}
	}

	enc := data
	if c != None {
		scratch := getBuf()
		defer putBuf(scratch)
		if enc, err = compress(c, data, scratch); err != nil {
			return nil, h, ts, err
		}
	}
	size := HeaderSize + len(enc)
	if limit <= 0 || limit > lengthOffset+4+MaxBatchSize {
		limit = lengthOffset + 4 + MaxBatchSize
	}
	if size > limit {
		return nil, h, ts, &TooLargeError{Size: size, Limit: limit}
	}
	out := make([]byte, size)
	copy(out, b[:HeaderSize])
	copy(out[HeaderSize:], enc)
	be.PutUint32(out[lengthOffset:], uint32(len(out)-lengthOffset-4))
	attrs := h.Attributes&^attrCompressionMask | int16(c)
	be.PutUint16(out[attrOffset:], uint16(attrs))
	be.PutUint32(out[crcOffset:], ComputeCRC(out))
	h, err = ParseHeader(out)
	return out, h, ts, err
}

// xerialBlock is the uncompressed size of the snappy blocks Rebuild
// writes: xerial snappy-java's default, which Kafka's SnappyOutputStream
// uses.
const xerialBlock = 32 << 10

// xerialHeader is the xerial stream header: magic, version 1, minimum
// compatible version 1.
var xerialHeader = append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)

var (
	// gzipWriters use level 6, Kafka's default gzip level (zlib's
	// default).
	gzipWriters = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, 6)
		return w
	}}
	// lz4Writers write frames the way Kafka's KafkaLZ4BlockOutputStream
	// does: 64 KiB independent blocks, no block or content checksum.
	lz4Writers = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.BlockChecksumOption(false))
		return w
	}}
	// zstdEnc is safe for concurrent EncodeAll calls. SpeedDefault is
	// about zstd level 3, Kafka's default zstd level.
	zstdEnc = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	})
)

// compress encodes src with codec c (not None) into scratch and returns
// the encoded bytes, which alias scratch or are newly allocated.
func compress(c Codec, src []byte, scratch *bytes.Buffer) ([]byte, error) {
	switch c {
	case Gzip:
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		w.Reset(scratch)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		w.Reset(nil) // drop the reference to scratch
		return scratch.Bytes(), nil
	case Snappy:
		// xerial framing (magic header, then length-prefixed raw snappy
		// blocks), as Kafka's broker writes it with snappy-java's
		// SnappyOutputStream.
		n := len(xerialHeader)
		for p := src; len(p) > 0; p = p[min(len(p), xerialBlock):] {
			n += 4 + s2.MaxEncodedLen(min(len(p), xerialBlock))
		}
		scratch.Grow(n)
		out := append(scratch.AvailableBuffer(), xerialHeader...)
		for p := src; len(p) > 0; p = p[min(len(p), xerialBlock):] {
			chunk := p[:min(len(p), xerialBlock)]
			at := len(out)
			room := s2.MaxEncodedLen(len(chunk))
			out = out[:at+4+room]
			e := s2.EncodeSnappy(out[at+4:], chunk)
			be.PutUint32(out[at:], uint32(len(e)))
			out = out[:at+4+copy(out[at+4:], e)]
		}
		return out, nil
	case LZ4:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(scratch)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		w.Reset(nil)
		return scratch.Bytes(), nil
	case Zstd:
		enc, err := zstdEnc()
		if err != nil {
			return nil, err
		}
		// Room for incompressible records, so the pooled buffer is used.
		scratch.Grow(len(src) + len(src)/64 + 1024)
		return enc.EncodeAll(src, scratch.AvailableBuffer()), nil
	}
	return nil, ErrCodec
}
