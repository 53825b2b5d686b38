// Package recwire is the encoding of Kafka's coordinator records that the
// group record packages share: classic (non-flexible) keys and compact
// (flexible) values with a Tagged-field section, as Kafka's generated
// message classes write them.
package recwire

import (
	"encoding/binary"
	"errors"
	"math"
)

// ErrShort is returned when a record ends before its schema does.
var ErrShort = errors.New("record truncated")

// ErrInvalid is returned for a length or count that cannot be right.
var ErrInvalid = errors.New("record malformed")

// Writer appends Kafka's wire encodings. Keys use the classic (non
// flexible) encodings; values use the compact (flexible) ones with a
// Tagged-field section, as the generated Kafka message classes do.
type Writer struct{ B []byte }

// I8 appends an int8.
func (w *Writer) I8(v int8) { w.B = append(w.B, byte(v)) }

// I16 appends a big-endian int16.
func (w *Writer) I16(v int16) { w.B = binary.BigEndian.AppendUint16(w.B, uint16(v)) }

// I32 appends a big-endian int32.
func (w *Writer) I32(v int32) { w.B = binary.BigEndian.AppendUint32(w.B, uint32(v)) }

// I64 appends a big-endian int64.
func (w *Writer) I64(v int64) { w.B = binary.BigEndian.AppendUint64(w.B, uint64(v)) }

// Uvarint appends an unsigned varint.
func (w *Writer) Uvarint(v uint64) {
	w.B = binary.AppendUvarint(w.B, v)
}

// Uuid appends a 16-byte UUID.
func (w *Writer) Uuid(v [16]byte) { w.B = append(w.B, v[:]...) }

// Str is a non-flexible string: int16 length then bytes.
func (w *Writer) Str(s string) {
	w.I16(int16(len(s)))
	w.B = append(w.B, s...)
}

// Cstr is a compact string: uvarint length+1 then bytes.
func (w *Writer) Cstr(s string) {
	w.Uvarint(uint64(len(s)) + 1)
	w.B = append(w.B, s...)
}

// Cnstr is a compact nullable string: 0 for null.
func (w *Writer) Cnstr(s *string) {
	if s == nil {
		w.Uvarint(0)
		return
	}
	w.Cstr(*s)
}

// Cbytes is compact bytes.
func (w *Writer) Cbytes(b []byte) {
	w.Uvarint(uint64(len(b)) + 1)
	w.B = append(w.B, b...)
}

// Carr writes a compact array length (n+1).
func (w *Writer) Carr(n int) { w.Uvarint(uint64(n) + 1) }

// Ci32s appends a compact array of int32.
func (w *Writer) Ci32s(v []int32) {
	w.Carr(len(v))
	for _, x := range v {
		w.I32(x)
	}
}

// Cstrs appends a compact array of compact strings.
func (w *Writer) Cstrs(v []string) {
	w.Carr(len(v))
	for _, s := range v {
		w.Cstr(s)
	}
}

// Tags writes a Tagged-field section; fields must be sorted by tag.
func (w *Writer) Tags(fields []Tagged) {
	w.Uvarint(uint64(len(fields)))
	for _, f := range fields {
		w.Uvarint(uint64(f.Tag))
		w.Uvarint(uint64(len(f.Data)))
		w.B = append(w.B, f.Data...)
	}
}

// Tagged is one tagged field's raw value.
type Tagged struct {
	// Tag is the field's tag.
	Tag uint32
	// Data is the field's encoded value.
	Data []byte
}

// Reader decodes what Writer encodes; the first error sticks.
type Reader struct {
	// B is what is left to read.
	B []byte
	// Err is the first error met.
	Err error
}

// Fail records err (the first one sticks) and stops reading.
func (r *Reader) Fail(err error) {
	if r.Err == nil {
		r.Err = err
	}
	r.B = nil
}

// Take reads n raw bytes.
func (r *Reader) Take(n int) []byte {
	if r.Err != nil {
		return nil
	}
	if n < 0 || n > len(r.B) {
		r.Fail(ErrShort)
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// I8 reads an int8.
func (r *Reader) I8() int8 {
	b := r.Take(1)
	if b == nil {
		return 0
	}
	return int8(b[0])
}

// I16 reads a big-endian int16.
func (r *Reader) I16() int16 {
	b := r.Take(2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

// I32 reads a big-endian int32.
func (r *Reader) I32() int32 {
	b := r.Take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

// I64 reads a big-endian int64.
func (r *Reader) I64() int64 {
	b := r.Take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail(ErrInvalid)
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Uuid reads a 16-byte UUID.
func (r *Reader) Uuid() (u [16]byte) {
	copy(u[:], r.Take(16))
	return u
}

// Str reads a classic string.
func (r *Reader) Str() string {
	n := r.I16()
	if n < 0 {
		r.Fail(ErrInvalid)
		return ""
	}
	return string(r.Take(int(n)))
}

// Clen reads a compact length; -1 is null.
func (r *Reader) Clen() int {
	v := r.Uvarint()
	if v > math.MaxInt32 {
		r.Fail(ErrInvalid)
		return 0
	}
	return int(v) - 1
}

// Cstr reads a compact string.
func (r *Reader) Cstr() string {
	n := r.Clen()
	if n < 0 {
		r.Fail(ErrInvalid)
		return ""
	}
	return string(r.Take(n))
}

// Cnstr reads a compact nullable string.
func (r *Reader) Cnstr() *string {
	n := r.Clen()
	if n < 0 || r.Err != nil {
		return nil
	}
	s := string(r.Take(n))
	return &s
}

// Cbytes reads compact bytes.
func (r *Reader) Cbytes() []byte {
	n := r.Clen()
	if n < 0 {
		r.Fail(ErrInvalid)
		return nil
	}
	b := r.Take(n)
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// Carr reads a non-null compact array count, checking that at least
// Carr bytes per element remain so a hostile count cannot allocate.
func (r *Reader) Carr(min int) int {
	n := r.Clen()
	if r.Err != nil {
		return 0
	}
	if n < 0 || n*min > len(r.B) {
		r.Fail(ErrInvalid)
		return 0
	}
	return n
}

// Ci32s reads a compact array of int32.
func (r *Reader) Ci32s() []int32 {
	n := r.Carr(4)
	if n == 0 {
		return nil
	}
	out := make([]int32, 0, n)
	for range n {
		out = append(out, r.I32())
	}
	return out
}

// Cstrs reads a compact array of compact strings.
func (r *Reader) Cstrs() []string {
	n := r.Carr(1)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.Cstr())
	}
	return out
}

// Tags reads a tagged-field section, calling known for each tag; a tag
// Tags does not claim (returns false) is skipped.
func (r *Reader) Tags(known func(tag uint32, sub *Reader) bool) {
	n := r.Uvarint()
	if n > uint64(len(r.B)) {
		r.Fail(ErrInvalid)
		return
	}
	for range n {
		tag := r.Uvarint()
		size := r.Uvarint()
		if tag > math.MaxUint32 || size > uint64(len(r.B)) {
			r.Fail(ErrInvalid)
			return
		}
		data := r.Take(int(size))
		if r.Err != nil {
			return
		}
		if known != nil {
			sub := &Reader{B: data}
			if known(uint32(tag), sub) && sub.Err != nil {
				r.Fail(sub.Err)
				return
			}
		}
	}
}

// Done reports the sticky error, or an error if bytes remain.
func (r *Reader) Done() error {
	if r.Err != nil {
		return r.Err
	}
	if len(r.B) != 0 {
		return ErrInvalid
	}
	return nil
}
