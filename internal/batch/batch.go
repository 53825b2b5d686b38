// Package batch reads and validates Kafka v2 record batches (magic 2), the
// unit in which sluice stores, replicates and serves data. A batch is kept
// byte-for-byte as the producer sent it, except for what Kafka's leader
// rewrites too: the base offset and the partition leader epoch (outside the
// CRC), the timestamp type and max timestamp (SetMaxTimestamp, which
// recomputes the CRC), and, when the topic's compression.type asks for
// another codec, the whole batch (Rebuild). Followers store the leader's
// bytes as they are.
//
// Layout (big-endian), offsets in bytes:
//
//	0  baseOffset int64        27 baseTimestamp int64
//	8  batchLength int32       35 maxTimestamp int64
//	12 partitionLeaderEpoch    43 producerId int64
//	16 magic int8              51 producerEpoch int16
//	17 crc uint32 (CRC32C of   53 baseSequence int32
//	   bytes 21..end)          57 recordCount int32
//	21 attributes int16        61 records...
//	23 lastOffsetDelta int32
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// HeaderSize is the size of a v2 batch header; records follow it.
const HeaderSize = 61

// lengthOffset is where batchLength sits; Size() = lengthOffset+4+Length.
const (
	lengthOffset = 8
	epochOffset  = 12
	magicOffset  = 16
	crcOffset    = 17
	attrOffset   = 21
	maxTsOffset  = 35
)

// NoTimestamp is a record timestamp meaning "none" (Kafka's
// RecordBatch.NO_TIMESTAMP).
const NoTimestamp = -1

// MaxBatchSize bounds a single batch (and its decompressed records) no
// matter what its header claims.
const MaxBatchSize = 1 << 30

// Errors.
var (
	// ErrCorrupt reports a batch whose bytes do not parse, whose CRC does not
	// match, or whose records are inconsistent with the header (Kafka's
	// CORRUPT_MESSAGE).
	ErrCorrupt = errors.New("batch: corrupt record batch")
	// ErrMagic reports a batch whose magic byte is not 2 (Kafka's
	// UNSUPPORTED_FOR_MESSAGE_FORMAT / INVALID_RECORD for produce v3+).
	ErrMagic = errors.New("batch: unsupported magic")
	// ErrShort reports fewer bytes than the header says (a torn tail on disk,
	// or a partial batch at the end of a fetch response).
	ErrShort = errors.New("batch: short batch")
)

// Attribute bits.
const (
	attrCompressionMask = 0x07
	attrTimestampType   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

// Codec is the compression codec of a batch's records.
type Codec int8

// Codecs, as numbered in the attributes field.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

// String names the codec as Kafka's compression.type does.
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Header is the decoded v2 batch header.
type Header struct {
	BaseOffset      int64
	Length          int32 // batchLength: bytes after the length field
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

var be = binary.BigEndian

// ParseHeader decodes the header at the start of b. It checks the magic and
// that the length is plausible; it does not check that b holds the whole
// batch (see Next) nor the CRC.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < magicOffset+1 {
		return Header{}, ErrShort
	}
	var h Header
	h.BaseOffset = int64(be.Uint64(b))
	h.Length = int32(be.Uint32(b[lengthOffset:]))
	h.LeaderEpoch = int32(be.Uint32(b[epochOffset:]))
	h.Magic = int8(b[magicOffset])
	if h.Magic != 2 {
		return h, ErrMagic
	}
	if h.Length < HeaderSize-lengthOffset-4 || int64(h.Length) > MaxBatchSize {
		return h, ErrCorrupt
	}
	if len(b) < HeaderSize {
		return h, ErrShort
	}
	h.CRC = be.Uint32(b[crcOffset:])
	h.Attributes = int16(be.Uint16(b[attrOffset:]))
	h.LastOffsetDelta = int32(be.Uint32(b[23:]))
	h.BaseTimestamp = int64(be.Uint64(b[27:]))
	h.MaxTimestamp = int64(be.Uint64(b[maxTsOffset:]))
	h.ProducerID = int64(be.Uint64(b[43:]))
	h.ProducerEpoch = int16(be.Uint16(b[51:]))
	h.BaseSequence = int32(be.Uint32(b[53:]))
	h.NumRecords = int32(be.Uint32(b[57:]))
	if h.LastOffsetDelta < 0 || h.NumRecords < 0 {
		return h, ErrCorrupt
	}
	return h, nil
}

// Size is the number of bytes of the whole batch.
func (h Header) Size() int { return lengthOffset + 4 + int(h.Length) }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// LastSequence is the sequence number of the last record, with Kafka's
// wrap-around at MaxInt32.
func (h Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return h.BaseSequence
	}
	last := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if last > math.MaxInt32 {
		last -= math.MaxInt32 + 1
	}
	return int32(last)
}

// Compression returns the codec of the records.
func (h Header) Compression() Codec { return Codec(h.Attributes & attrCompressionMask) }

// IsTransactional reports the transactional attribute.
func (h Header) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports the control attribute (transaction markers).
func (h Header) IsControl() bool { return h.Attributes&attrControl != 0 }

// LogAppendTime reports whether timestamps are LogAppendTime (else CreateTime).
func (h Header) LogAppendTime() bool { return h.Attributes&attrTimestampType != 0 }

// HasProducerID reports whether the batch carries idempotence metadata.
func (h Header) HasProducerID() bool { return h.ProducerID >= 0 }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ComputeCRC returns the CRC32C of the batch's attributes..end.
func ComputeCRC(b []byte) uint32 { return crc32.Checksum(b[attrOffset:], castagnoli) }

// CheckCRC verifies the CRC of one whole batch (b must be exactly the batch).
func CheckCRC(b []byte) error {
	if len(b) < HeaderSize {
		return ErrShort
	}
	if ComputeCRC(b) != be.Uint32(b[crcOffset:]) {
		return ErrCorrupt
	}
	return nil
}

// SetBaseOffset rewrites the base offset (outside the CRC).
func SetBaseOffset(b []byte, off int64) { be.PutUint64(b, uint64(off)) }

// SetLeaderEpoch rewrites the partition leader epoch (outside the CRC).
func SetLeaderEpoch(b []byte, epoch int32) { be.PutUint32(b[epochOffset:], uint32(epoch)) }

// SetMaxTimestamp sets the timestamp type (attribute bit 3: LogAppendTime
// when logAppendTime, else CreateTime) and the max timestamp of one whole
// batch (b must be exactly the batch) and recomputes the CRC, as Kafka's
// leader does with DefaultRecordBatch.setMaxTimestamp: LogAppendTime with
// the broker's time, or CreateTime with the largest record timestamp. The
// other attributes and the records (their timestamp deltas included) are
// left alone; a batch that already has that type and max timestamp is not
// touched. It refuses a batch whose CRC does not match (ErrCorrupt), so it
// never turns corrupt bytes into a valid batch. It returns the updated
// header.
func SetMaxTimestamp(b []byte, logAppendTime bool, ts int64) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	switch {
	case len(b) < h.Size():
		return h, ErrShort
	case len(b) > h.Size():
		return h, ErrCorrupt
	}
	if h.LogAppendTime() == logAppendTime && h.MaxTimestamp == ts {
		return h, nil
	}
	if err := CheckCRC(b); err != nil {
		return h, err
	}
	h.Attributes &^= attrTimestampType
	if logAppendTime {
		h.Attributes |= attrTimestampType
	}
	h.MaxTimestamp = ts
	be.PutUint16(b[attrOffset:], uint16(h.Attributes))
	be.PutUint64(b[maxTsOffset:], uint64(ts))
	h.CRC = ComputeCRC(b)
	be.PutUint32(b[crcOffset:], h.CRC)
	return h, nil
}

// Next splits the first whole batch off b. It returns ErrShort when b ends
// inside a batch (a torn tail, or a fetch response cut at MaxBytes).
func Next(b []byte) (h Header, batch, rest []byte, err error) {
	h, err = ParseHeader(b)
	if err != nil {
		return h, nil, b, err
	}
	n := h.Size()
	if len(b) < n {
		return h, nil, b, ErrShort
	}
	return h, b[:n], b[n:], nil
}
