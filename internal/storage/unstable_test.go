package storage

import (
	"reflect"
	"testing"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

// TestCompletedTxns: the transactions whose marker is at or above an
// offset, committed and aborted, with their first offsets, also when the
// transaction began segments (and producer snapshots) before its marker
// and the newest snapshot, written at a clean close, has it ended.
func TestCompletedTxns(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig()
	l := mustOpen(t, fsys, cfg)
	a := appendLeader(t, l, txnBatch(7, 0, 1))
	for range 40 { // several segments of 4 KiB, a snapshot at each roll
		appendLeader(t, l, mkBatch(plain(5, 100, t0.UnixMilli())))
	}
	b := appendLeader(t, l, txnBatch(8, 0, 2))
	commit := appendLeader(t, l, batch.EncodeMarker(7, 0, batch.Marker{Commit: true}, t0.UnixMilli()))
	abort := appendLeader(t, l, batch.EncodeMarker(8, 0, batch.Marker{}, t0.UnixMilli()))
	appendLeader(t, l, mkBatch(plain(2, 10, t0.UnixMilli())))
	if l.NumSegments() < 3 {
		t.Fatalf("only %d segments", l.NumSegments())
	}
	if err := l.Close(); err != nil { // a snapshot at the log end
		t.Fatal(err)
	}
	l = mustOpen(t, fsys, cfg)
	defer l.Close()
	c7 := producer.Completed{ProducerID: 7, FirstOffset: a.FirstOffset, LastOffset: commit.FirstOffset}
	c8 := producer.Completed{ProducerID: 8, FirstOffset: b.FirstOffset, LastOffset: abort.FirstOffset, Aborted: true}
	check := func(what string) {
		t.Helper()
		for _, tc := range []struct {
			from int64
			want []producer.Completed
		}{
			{0, []producer.Completed{c7, c8}},
			{b.FirstOffset, []producer.Completed{c7, c8}},
			{commit.FirstOffset, []producer.Completed{c7, c8}},
			{commit.FirstOffset + 1, []producer.Completed{c8}},
			{abort.FirstOffset + 1, nil},
			{l.LogEndOffset(), nil},
		} {
			got, err := l.CompletedTxns(tc.from)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s: CompletedTxns(%d) = %+v, want %+v", what, tc.from, got, tc.want)
			}
		}
	}
	check("own")
	l.HandOver(func() *producer.State { return nil })
	check("handed over")
}
