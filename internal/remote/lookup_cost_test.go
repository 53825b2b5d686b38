package remote_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
)

// countingMeta is a remote.Metadata that counts the listings asked of it.
type countingMeta struct {
	remote.MemMetadata
	calls atomic.Int64
}

// Segments implements remote.Metadata.
func (m *countingMeta) Segments(p remote.Partition) []remote.Segment {
	m.calls.Add(1)
	return m.MemMetadata.Segments(p)
}

// TestAbortedTxnsListsSegmentsOnce: a read_committed read near the start
// of a remote log without aborted transactions after it walks every
// remote segment up to the local log; it lists the segments once, not
// once per segment (which made a consumer's pass over S segments cost
// S² copies of the list: minutes of CPU for 1 GiB in 1 MiB segments).
func TestAbortedTxnsListsSegmentsOnce(t *testing.T) {
	meta := &countingMeta{}
	const n = 1000
	for i := range int64(n) {
		meta.Add(remote.Segment{Partition: part, ID: [16]byte{byte(i >> 8), byte(i), 1},
			StartOffset: 10 * i, EndOffset: 10*i + 9, LeaderEpochs: []epoch.Entry{{Epoch: 0, StartOffset: 10 * i}},
			TxnIndexEmpty: true, State: remote.CopyFinished})
	}
	rd := remote.NewReader(&objstore.Memory{}, meta, remote.ReaderConfig{})
	lineage := []epoch.Entry{{Epoch: 0, StartOffset: 0}}
	got, complete, err := rd.AbortedTxns(context.Background(), part, lineage, 0, 10, 10*n)
	if err != nil || complete || len(got) != 0 {
		t.Fatalf("AbortedTxns: %v, complete %v, err %v; want none, not complete (the local log goes on)", got, complete, err)
	}
	if c := meta.calls.Load(); c != 1 {
		t.Fatalf("AbortedTxns over %d segments listed them %d times, want once", n, c)
	}
}
