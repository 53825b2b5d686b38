package batch

import (
	"encoding/binary"
)

// Transaction markers are control batches (attributes: transactional and
// control) holding one record whose key is the control record type (int16
// version 0, int16 type: 0 ABORT, 1 COMMIT) and whose value is the end
// transaction marker (int16 version 0, int32 coordinator epoch), Kafka's
// ControlRecordType and EndTransactionMarker.

// Control record types (ControlRecordType).
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// Marker is a decoded transaction marker.
type Marker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// ParseMarker reads the marker of control batch b (a whole stored
// batch). A control batch of another type (Kafka's leader change records
// and KRaft's snapshot markers never appear in a partition's log) or a
// malformed one returns ErrCorrupt.
func ParseMarker(b []byte) (Marker, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Marker{}, err
	}
	if !h.IsControl() || h.NumRecords != 1 {
		return Marker{}, ErrCorrupt
	}
	var m Marker
	bad := true
	err = Records(b, func(r Record) bool {
		if len(r.Key) < 4 || len(r.Value) < 6 || binary.BigEndian.Uint16(r.Key) != 0 {
			return false
		}
		switch int16(binary.BigEndian.Uint16(r.Key[2:])) {
		case ControlAbort:
		case ControlCommit:
			m.Commit = true
		default:
			return false
		}
		m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
		bad = false
		return false
	})
	if err != nil || bad {
		return Marker{}, ErrCorrupt
	}
	return m, nil
}

// EncodeMarker builds a transaction marker batch for producer pid at
// epoch, timestamped ts (ms). Its base offset and leader epoch are set on
// append.
func EncodeMarker(pid int64, epoch int16, m Marker, ts int64) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(m.CoordinatorEpoch))
	return Encode([]KV{{key, value}}, ts, Producer{ID: pid, Epoch: epoch, Attrs: attrTransactional | attrControl})
}

// baseTimestampOffset is where a v2 batch's base timestamp sits.
const baseTimestampOffset = 27

// WithDeleteHorizon returns a copy of control batch b whose base timestamp
// is horizon, marked as its delete horizon (KIP-534's attribute): the log
// cleaner sets it the first time a transaction marker may go and removes
// the marker once the horizon has passed (Kafka's Cleaner). The marker
// record's timestamp delta is left as it is.
func WithDeleteHorizon(b []byte, horizon int64) []byte {
	c := append([]byte(nil), b...)
	be.PutUint16(c[attrOffset:], be.Uint16(c[attrOffset:])|attrDeleteHorizon)
	be.PutUint64(c[baseTimestampOffset:], uint64(horizon))
	be.PutUint32(c[crcOffset:], ComputeCRC(c))
	return c
}
