package protocol

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Fetch response encoded with markers and cut into pieces reassembles
// into the frame of the same response encoded with the data in place, for
// non-flexible (v11) and flexible (v16) versions, whatever the order of the
// splices and with one marker absent.
func TestSplicePiecesRebuildTheFrame(t *testing.T) {
	for _, version := range []int16{4, 11, 12, 16} {
		data := [][]byte{bytes.Repeat([]byte("a"), 300), bytes.Repeat([]byte("b"), 70000), {}}
		var splices []Splice
		withData := kmsg.NewPtrFetchResponse()
		withMarkers := kmsg.NewPtrFetchResponse()
		for i, d := range data {
			for _, r := range []*kmsg.FetchResponse{withData, withMarkers} {
				tp := kmsg.NewFetchResponseTopic()
				tp.Topic = "t"
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = int32(i)
				p.HighWatermark = int64(i * 7)
				tp.Partitions = append(tp.Partitions, p)
				r.Topics = append(r.Topics, tp)
			}
			withData.Topics[i].Partitions[0].RecordBatches = d
			var m [MarkerLen]byte
			copy(m[:], "marker-0123456-")
			m[15] = byte(i)
			withMarkers.Topics[i].Partitions[0].RecordBatches = append([]byte(nil), m[:]...)
			splices = append(splices, Splice{Marker: m, Len: int64(len(d)), Data: bytes.NewReader(d)})
		}
		// Reverse order, plus a splice whose marker is not in the response.
		splices = append([]Splice{{Marker: [MarkerLen]byte{1, 2, 3}, Len: 5, Data: bytes.NewReader([]byte("zzzzz"))}},
			splices[2], splices[1], splices[0])
		encode := func(r *kmsg.FetchResponse) []byte {
			r.SetVersion(version)
			b := r.AppendTo([]byte{0, 0, 0, 0})
			binary.BigEndian.PutUint32(b, uint32(len(b)-4))
			return b
		}
		want := encode(withData)
		pieces, ok := splicePieces(encode(withMarkers), version >= 12, splices)
		if !ok {
			t.Fatalf("v%d: markers not found where expected", version)
		}
		var got bytes.Buffer
		for _, pc := range pieces {
			if pc.s == nil {
				got.Write(pc.b)
			} else if _, err := pc.s.Data.WriteTo(&got); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("v%d: spliced frame (%d bytes) differs from the plain encoding (%d bytes)", version, got.Len(), len(want))
		}
	}
}

// A marker that is not the value of a bytes field is refused.
func TestSplicePiecesRefusesMisplacedMarker(t *testing.T) {
	var m [MarkerLen]byte
	copy(m[:], "0123456789abcdef")
	buf := append([]byte{0, 0, 0, 0, 9, 9, 9, 9, 9}, m[:]...)
	if _, ok := splicePieces(buf, false, []Splice{{Marker: m, Len: 1, Data: bytes.NewReader([]byte("x"))}}); ok {
		t.Fatal("a marker without its length prefix was accepted")
	}
}
