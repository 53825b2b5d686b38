package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/batch"
)

// TestDumpSegment prints a segment of a transactional batch, its commit
// marker and a torn tail, as sluice dump-log does.
func TestDumpSegment(t *testing.T) {
	data := batch.Encode([]batch.KV{{Key: []byte("k"), Value: []byte("v 1")}, {Value: []byte("v2")}}, 1000,
		batch.Producer{ID: 7, Epoch: 3, Attrs: batch.Transactional})
	batch.SetBaseOffset(data, 40)
	batch.SetLeaderEpoch(data, 5)
	marker := batch.EncodeMarker(7, 3, batch.Marker{Commit: true, CoordinatorEpoch: 9}, 1001)
	batch.SetBaseOffset(marker, 42)
	seg := append(append(append([]byte{}, data...), marker...), data[:20]...)

	var out bytes.Buffer
	dumpSegment(&out, seg, true, 0, 1<<62)
	got := out.String()
	for _, want := range []string{
		"baseOffset: 40 lastOffset: 41 count: 2 ",
		"producerId: 7 producerEpoch: 3 partitionLeaderEpoch: 5 isTransactional: true isControl: false position: 0 ",
		"isvalid: true",
		"| offset: 40 keySize: 1 valueSize: 3 key: k payload: \"v 1\"",
		"| offset: 41 keySize: 0 valueSize: 2 key: null payload: v2",
		"baseOffset: 42 lastOffset: 42 count: 1 ",
		"| offset: 42 endTxnMarker: COMMIT coordinatorEpoch: 9",
		"20 bytes left unread",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}

	// --offsets selects the batches that overlap the range.
	out.Reset()
	dumpSegment(&out, seg, false, 42, 42)
	if got := out.String(); strings.Contains(got, "baseOffset: 40") || !strings.Contains(got, "endTxnMarker: COMMIT") {
		t.Errorf("--offsets 42-42 printed:\n%s", got)
	}

	// A corrupted byte fails the CRC check.
	bad := append([]byte{}, seg...)
	bad[len(data)-1] ^= 0xff
	out.Reset()
	dumpSegment(&out, bad, false, 0, 1<<62)
	if !strings.Contains(out.String(), "isvalid: false") {
		t.Errorf("a corrupt batch is reported valid:\n%s", out.String())
	}
}
