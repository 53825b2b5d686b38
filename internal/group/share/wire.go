package share

import (
	"encoding/binary"
	"errors"
	"math"
)

// errShort is returned when a record ends before its schema does.
var errShort = errors.New("share: record truncated")

// errInvalid is returned for a length or count that cannot be right.
var errInvalid = errors.New("share: record malformed")

// writer appends Kafka's wire encodings. Keys use the classic (non
// flexible) encodings; values use the compact (flexible) ones with a
// tagged-field section, as the generated Kafka message classes do.
type writer struct{ b []byte }

func (w *writer) i8(v int8)   { w.b = append(w.b, byte(v)) }
func (w *writer) i16(v int16) { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *writer) i32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *writer) i64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }
func (w *writer) uvarint(v uint64) {
	w.b = binary.AppendUvarint(w.b, v)
}
func (w *writer) uuid(v [16]byte) { w.b = append(w.b, v[:]...) }

// str is a non-flexible string: int16 length then bytes.
func (w *writer) str(s string) {
	w.i16(int16(len(s)))
	w.b = append(w.b, s...)
}

// cstr is a compact string: uvarint length+1 then bytes.
func (w *writer) cstr(s string) {
	w.uvarint(uint64(len(s)) + 1)
	w.b = append(w.b, s...)
}

// cnstr is a compact nullable string: 0 for null.
func (w *writer) cnstr(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.cstr(*s)
}

// cbytes is compact bytes.
func (w *writer) cbytes(b []byte) {
	w.uvarint(uint64(len(b)) + 1)
	w.b = append(w.b, b...)
}

// carr writes a compact array length (n+1).
func (w *writer) carr(n int) { w.uvarint(uint64(n) + 1) }

func (w *writer) ci32s(v []int32) {
	w.carr(len(v))
	for _, x := range v {
		w.i32(x)
	}
}

func (w *writer) cstrs(v []string) {
	w.carr(len(v))
	for _, s := range v {
		w.cstr(s)
	}
}

// tags writes a tagged-field section; fields must be sorted by tag.
func (w *writer) tags(fields []tagged) {
	w.uvarint(uint64(len(fields)))
	for _, f := range fields {
		w.uvarint(uint64(f.tag))
		w.uvarint(uint64(len(f.data)))
		w.b = append(w.b, f.data...)
	}
}

// tagged is one tagged field's raw value.
type tagged struct {
	tag  uint32
	data []byte
}

// reader decodes what writer encodes; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail(errShort)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) i8() int8 {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return int8(b[0])
}

func (r *reader) i16() int16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *reader) i32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *reader) i64() int64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errInvalid)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uuid() (u [16]byte) {
	copy(u[:], r.take(16))
	return u
}

func (r *reader) str() string {
	n := r.i16()
	if n < 0 {
		r.fail(errInvalid)
		return ""
	}
	return string(r.take(int(n)))
}

// clen reads a compact length; -1 is null.
func (r *reader) clen() int {
	v := r.uvarint()
	if v > math.MaxInt32 {
		r.fail(errInvalid)
		return 0
	}
	return int(v) - 1
}

func (r *reader) cstr() string {
	n := r.clen()
	if n < 0 {
		r.fail(errInvalid)
		return ""
	}
	return string(r.take(n))
}

func (r *reader) cnstr() *string {
	n := r.clen()
	if n < 0 || r.err != nil {
		return nil
	}
	s := string(r.take(n))
	return &s
}

func (r *reader) cbytes() []byte {
	n := r.clen()
	if n < 0 {
		r.fail(errInvalid)
		return nil
	}
	b := r.take(n)
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// carr reads a non-null compact array count, checking that at least
// min bytes per element remain so a hostile count cannot allocate.
func (r *reader) carr(min int) int {
	n := r.clen()
	if r.err != nil {
		return 0
	}
	if n < 0 || n*min > len(r.b) {
		r.fail(errInvalid)
		return 0
	}
	return n
}

func (r *reader) ci32s() []int32 {
	n := r.carr(4)
	if n == 0 {
		return nil
	}
	out := make([]int32, 0, n)
	for range n {
		out = append(out, r.i32())
	}
	return out
}

func (r *reader) cstrs() []string {
	n := r.carr(1)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.cstr())
	}
	return out
}

// tags reads a tagged-field section, calling known for each tag; a tag
// known does not claim (returns false) is skipped.
func (r *reader) tags(known func(tag uint32, sub *reader) bool) {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errInvalid)
		return
	}
	for range n {
		tag := r.uvarint()
		size := r.uvarint()
		if tag > math.MaxUint32 || size > uint64(len(r.b)) {
			r.fail(errInvalid)
			return
		}
		data := r.take(int(size))
		if r.err != nil {
			return
		}
		if known != nil {
			sub := &reader{b: data}
			if known(uint32(tag), sub) && sub.err != nil {
				r.fail(sub.err)
				return
			}
		}
	}
}

// done reports the sticky error, or an error if bytes remain.
func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return errInvalid
	}
	return nil
}
