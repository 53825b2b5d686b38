package batch

import (
	"encoding/binary"
)

// attrDeleteHorizon marks a batch whose base timestamp is the delete
// horizon of its tombstones (KIP-534; Kafka's
// DefaultRecordBatch.DELETE_HORIZON_FLAG_MASK).
const attrDeleteHorizon = 0x40

// DeleteHorizon returns the time (ms) after which the log cleaner may drop
// the batch's tombstones, if the cleaner has set one (KIP-534).
func (h Header) DeleteHorizon() (int64, bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.BaseTimestamp, true
}

// FilterOptions says how Filter treats a batch beyond which records it
// keeps.
type FilterOptions struct {
	// KeepEmpty writes a batch of no records (header only, offsets and
	// producer fields kept) when no record is kept, instead of dropping the
	// batch: the cleaner keeps the last batch of each producer so that
	// idempotent producer state survives compaction.
	KeepEmpty bool
	// DeleteHorizon, when > 0, is set as the batch's delete horizon if it
	// has none yet and a kept record is a tombstone (null value), as the
	// cleaner does the first time it cleans a tombstone (KIP-534).
	DeleteHorizon int64
}

// Filter returns the stored batch b (one whole, CRC-checked v2 batch) with
// only the records keep accepts, as Kafka's log cleaner rewrites a batch
// (MemoryRecords.filterTo): base offset, last offset delta, partition
// leader epoch, producer id, epoch and base sequence, attributes and codec
// stay; record bytes are copied (a record's timestamp delta is re-encoded
// only when the base timestamp becomes the delete horizon); the record
// count, max timestamp (CreateTime), length and CRC are new. keep is called
// with each record's absolute offset. It returns b itself when every record
// is kept and nothing else changes, nil when the batch is dropped, and
// kept, the number of records kept. A control batch is returned as it is:
// its markers follow the transaction rules, not keys.
func Filter(b []byte, keep func(offset int64, r *Record) bool, opt FilterOptions) (out []byte, kept int, err error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, 0, err
	}
	if len(b) != h.Size() {
		return nil, 0, ErrCorrupt
	}
	if h.IsControl() {
		return b, int(h.NumRecords), nil
	}
	data := b[HeaderSize:]
	codec := h.Compression()
	if codec != None {
		buf := getBuf()
		defer putBuf(buf)
		if err := decompress(codec, data, buf); err != nil {
			return nil, 0, ErrCorrupt
		}
		data = buf.Bytes()
	}
	type span struct{ start, end int }
	var keptSpans []span
	tombstone := false
	maxTs := int64(NoTimestamp)
	var r Record
	p := data
	prev := int32(-1)
	for i := int32(0); i < h.NumRecords; i++ {
		start := len(data) - len(p)
		rest, ok := parseRecord(p, &r)
		if !ok || r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			return nil, 0, ErrCorrupt
		}
		prev = r.OffsetDelta
		if keep(h.BaseOffset+int64(r.OffsetDelta), &r) {
			keptSpans = append(keptSpans, span{start, len(data) - len(rest)})
			tombstone = tombstone || r.Value == nil
			maxTs = max(maxTs, h.BaseTimestamp+r.TimestampDelta)
		}
		p = rest
	}
	if len(p) != 0 {
		return nil, 0, ErrCorrupt
	}
	_, hasHorizon := h.DeleteHorizon()
	setHorizon := opt.DeleteHorizon > 0 && tombstone && !hasHorizon
	if len(keptSpans) == int(h.NumRecords) && !setHorizon {
		return b, len(keptSpans), nil
	}
	if len(keptSpans) == 0 && !opt.KeepEmpty {
		return nil, 0, nil
	}
	base := h.BaseTimestamp
	if setHorizon {
		base = opt.DeleteHorizon
	}
	recs := getBuf()
	defer putBuf(recs)
	var lenBuf, deltaBuf [binary.MaxVarintLen64]byte
	for _, sp := range keptSpans {
		raw := data[sp.start:sp.end]
		if base == h.BaseTimestamp {
			recs.Write(raw)
			continue
		}
		// Re-encode the timestamp delta against the new base: length,
		// attributes, timestamp delta, then the rest unchanged.
		length, n := binary.Varint(raw)
		body := raw[n : n+int(length)]
		tsDelta, m := binary.Varint(body[1:])
		rest := body[1+m:]
		newDelta := binary.AppendVarint(deltaBuf[:0], h.BaseTimestamp+tsDelta-base)
		newLen := 1 + len(newDelta) + len(rest)
		recs.Write(binary.AppendVarint(lenBuf[:0], int64(newLen)))
		recs.WriteByte(body[0])
		recs.Write(newDelta)
		recs.Write(rest)
	}
	attrs := h.Attributes
	enc := recs.Bytes()
	if len(keptSpans) == 0 {
		enc = nil
		attrs &^= attrCompressionMask // Kafka writes empty batches uncompressed
	} else if codec != None {
		scratch := getBuf()
		defer putBuf(scratch)
		if enc, err = compress(codec, enc, scratch); err != nil {
			return nil, 0, err
		}
	}
	if setHorizon {
		attrs |= attrDeleteHorizon
	}
	if h.LogAppendTime() || len(keptSpans) == 0 {
		maxTs = h.MaxTimestamp
	}
	out = make([]byte, HeaderSize+len(enc))
	copy(out, b[:HeaderSize])
	copy(out[HeaderSize:], enc)
	be.PutUint32(out[lengthOffset:], uint32(len(out)-lengthOffset-4))
	be.PutUint16(out[attrOffset:], uint16(attrs))
	be.PutUint64(out[27:], uint64(base))
	be.PutUint64(out[maxTsOffset:], uint64(maxTs))
	be.PutUint32(out[57:], uint32(len(keptSpans)))
	be.PutUint32(out[crcOffset:], ComputeCRC(out))
	return out, len(keptSpans), nil
}
