package protocol

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// MarkerLen is the length of a Splice marker.
const MarkerLen = 16

// Splice is one bytes field of a response sent from elsewhere (a segment
// file, with sendfile) instead of from the encoded response: the response
// is encoded with Marker in the field, and the writer replaces the marker
// and its length prefix by the data's own.
type Splice struct {
	Marker [MarkerLen]byte
	Len    int64
	Data   io.WriterTo
}

// Spliced is a response some of whose bytes fields are Splices (a zero-copy
// Fetch response). Markers must be unique within the response; a Splice
// whose marker the encoding does not contain is not sent.
type Spliced interface {
	kmsg.Response
	Splices() []Splice
}

// piece is a part of a spliced frame: bytes from the encoding, or a splice.
type piece struct {
	b []byte
	s *Splice
}

// splicePieces cuts an encoded frame (its 4-byte size prefix included) at
// each splice marker, replacing the marker's length prefix (a 4-byte int32
// or, flexible, an unsigned varint, of MarkerLen) by the data's, and
// rewrites the frame size. ok is false if a marker is not where a bytes
// field's value would be.
func splicePieces(buf []byte, flexible bool, splices []Splice) (pieces []piece, ok bool) {
	type found struct {
		at int
		s  *Splice
	}
	var at []found
	for i := range splices {
		if k := bytes.Index(buf[4:], splices[i].Marker[:]); k >= 0 {
			at = append(at, found{k + 4, &splices[i]})
		}
	}
	slices.SortFunc(at, func(a, b found) int { return a.at - b.at })
	from := 4
	total := int64(len(buf) - 4)
	var prefixes []byte
	for _, f := range at {
		s := f.s
		var start int
		if flexible {
			start = f.at - 1
			if start < from || buf[start] != MarkerLen+1 {
				return nil, false
			}
		} else {
			start = f.at - 4
			if start < from || binary.BigEndian.Uint32(buf[start:]) != MarkerLen {
				return nil, false
			}
		}
		n := len(prefixes)
		if flexible {
			prefixes = binary.AppendUvarint(prefixes, uint64(s.Len)+1)
		} else {
			prefixes = binary.BigEndian.AppendUint32(prefixes, uint32(s.Len))
		}
		pieces = append(pieces, piece{b: buf[from:start]}, piece{b: prefixes[n:len(prefixes):len(prefixes)]}, piece{s: s})
		total += int64(len(prefixes)-n) - int64(f.at+MarkerLen-start) + s.Len
		from = f.at + MarkerLen
	}
	pieces = append(pieces, piece{b: buf[from:]})
	binary.BigEndian.PutUint32(buf, uint32(total))
	pieces[0].b = buf[:len(pieces[0].b)+4]
	return pieces, true
}
