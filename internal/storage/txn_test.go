package storage

import (
	"fmt"
	"github.com/sluice-io/sluice/internal/producer"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/vfs"
)

// txnBatch is a transactional batch of pid.
func txnBatch(pid int64, seq int32, records int) []byte {
	b := mkBatch(spec{records: records, valSize: 20, ts: t0.UnixMilli(), pid: pid, seq: seq, fill: 't'})
	b[22] |= 0x10 // transactional (attributes low byte)
	batch.SetLeaderEpoch(b, -1)
	fixCRC(b)
	return b
}

func fixCRC(b []byte) {
	h, _ := batch.ParseHeader(b)
	h.CRC = batch.ComputeCRC(b)
	b[17], b[18], b[19], b[20] = byte(h.CRC>>24), byte(h.CRC>>16), byte(h.CRC>>8), byte(h.CRC)
}

func appendLeader(t *testing.T, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.AppendAssigning(b, 1, t0)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestAbortedTxnIndex: ABORT markers record their transactions in the
// aborted index, COMMIT markers do not; AbortedTxns answers by overlap;
// the entries and the open transactions survive a clean reopen, a crash
// (rebuilt by the producer replay) and a truncation that cuts a marker.
func TestAbortedTxnIndex(t *testing.T) {
	fsys := vfs.NewMem()
	l := mustOpen(t, fsys, testConfig())
	a1 := appendLeader(t, l, txnBatch(10, 0, 3))              // 0-2, pid 10
	b1 := appendLeader(t, l, txnBatch(11, 0, 2))              // 3-4, pid 11
	appendLeader(t, l, mkBatch(plain(2, 10, t0.UnixMilli()))) // 5-6
	ab := appendLeader(t, l, batch.EncodeMarker(10, 0, batch.Marker{Commit: false, CoordinatorEpoch: 3}, t0.UnixMilli()))
	cm := appendLeader(t, l, batch.EncodeMarker(11, 0, batch.Marker{Commit: true, CoordinatorEpoch: 3}, t0.UnixMilli()))
	appendLeader(t, l, txnBatch(10, 3, 2)) // a new transaction of pid 10, open
	want := []AbortedTxn{{ProducerID: 10, FirstOffset: a1.FirstOffset, LastOffset: ab.FirstOffset, LastStable: b1.FirstOffset}}
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted = %+v, want %+v", got, want)
	}
	if got := l.AbortedTxns(ab.FirstOffset+1, l.LogEndOffset()); len(got) != 0 {
		t.Fatalf("a fetch past the marker gets %+v", got)
	}
	if got := l.AbortedTxns(0, a1.FirstOffset); len(got) != 0 {
		t.Fatalf("a range below the transaction gets %+v", got)
	}
	openAt := cm.LastOffset + 1
	checkOpen := func(l *Log) {
		t.Helper()
		ps := mustProducers(t, l)
		if first, ok := ps.OpenTxn(10); !ok || first != openAt {
			t.Fatalf("pid 10 open txn = %d %v, want %d", first, ok, openAt)
		}
		if _, ok := ps.OpenTxn(11); ok {
			t.Fatal("committed transaction still open")
		}
	}
	checkOpen(l)

	// Clean reopen: from the index files and the snapshot at the end.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, fsys, testConfig())
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen aborted = %+v", got)
	}
	checkOpen(l)

	// Crash with everything synced: rebuilt by the replay.
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := fsys.Crash(rand.New(rand.NewSource(1)))
	l2 := mustOpen(t, crashed, testConfig())
	if got := l2.AbortedTxns(0, l2.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after crash aborted = %+v", got)
	}
	checkOpen(l2)

	// Truncation below the ABORT marker reopens the transaction and drops
	// its entry.
	if err := l2.TruncateTo(ab.FirstOffset); err != nil {
		t.Fatal(err)
	}
	if got := l2.AbortedTxns(0, l2.LogEndOffset()); len(got) != 0 {
		t.Fatalf("after truncation aborted = %+v", got)
	}
	if first, ok := mustProducers(t, l2).OpenTxn(10); !ok || first != a1.FirstOffset {
		t.Fatalf("truncated marker: pid 10 open = %d %v", first, ok)
	}
	l.Close()
	l2.Close()
}

// TestAbortedTxnIndexAcrossSegments: an entry lives with its marker's
// segment, is written at roll, and a search from an earlier segment finds
// it.
func TestAbortedTxnIndexAcrossSegments(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig()
	l := mustOpen(t, fsys, cfg)
	first := appendLeader(t, l, txnBatch(7, 0, 1))
	for i := 0; i < 40; i++ { // several segments of 4 KiB
		appendLeader(t, l, mkBatch(plain(5, 100, t0.UnixMilli())))
	}
	ab := appendLeader(t, l, batch.EncodeMarker(7, 0, batch.Marker{}, t0.UnixMilli()))
	for i := 0; i < 40; i++ {
		appendLeader(t, l, mkBatch(plain(5, 100, t0.UnixMilli())))
	}
	if l.NumSegments() < 3 {
		t.Fatalf("only %d segments", l.NumSegments())
	}
	want := []AbortedTxn{{ProducerID: 7, FirstOffset: first.FirstOffset, LastOffset: ab.FirstOffset, LastStable: ab.FirstOffset + 1}}
	if got := l.AbortedTxns(first.FirstOffset+1, first.FirstOffset+5); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted = %+v, want %+v", got, want)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := fsys.Crash(rand.New(rand.NewSource(2)))
	l2 := mustOpen(t, crashed, cfg)
	if got := l2.AbortedTxns(0, l2.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after crash aborted = %+v, want %+v", got, want)
	}
	l.Close()
	l2.Close()
}

// TestCompactionOfTransactions: the cleaner drops the records of aborted
// transactions and never lets one shadow a committed record of its key;
// committed transactional records and the markers stay.
func TestCompactionOfTransactions(t *testing.T) {
	fs := vfs.NewMem()
	cfg := compactConfig()
	l := mustOpen(t, fs, cfg)
	defer l.Close()
	now := t0
	txn := func(pid int64, seq int32, kvs ...string) {
		var rs []batchtest.Record
		for i := 0; i+1 < len(kvs); i += 2 {
			rs = append(rs, batchtest.Record{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
		}
		if _, err := l.AppendAssigning(batchtest.Build(batchtest.Options{Transactional: true, ProducerID: pid, BaseSequence: seq, BaseTimestamp: now.UnixMilli()}, rs), 1, now); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int64, commit bool) {
		if _, err := l.AppendAssigning(batch.EncodeMarker(pid, 0, batch.Marker{Commit: commit}, now.UnixMilli()), 1, now); err != nil {
			t.Fatal(err)
		}
	}
	txn(1, 0, "k", "committed", "j", "j1") // committed
	marker(1, true)
	txn(2, 0, "k", "aborted", "m", "m-aborted") // aborted: must not shadow k=committed
	marker(2, false)
	for i := 0; i < 30; i++ { // roll segments so the above is cleanable
		appendKeyed(t, l, now, batch.None, -1, 0, fmt.Sprintf("filler-%d", i%3), strings.Repeat("f", 60))
	}
	m := NewOffsetMap(1 << 16)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	st, err := l.Clean(now, l.LogEndOffset(), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string][]string{}
	for _, r := range readRecords(t, l) {
		vals[r.key] = append(vals[r.key], string(r.value))
	}
	if !reflect.DeepEqual(vals["k"], []string{"committed"}) || !reflect.DeepEqual(vals["j"], []string{"j1"}) || len(vals["m"]) != 0 {
		t.Fatalf("after cleaning (%+v): k=%q j=%q m=%q", st, vals["k"], vals["j"], vals["m"])
	}
	if got := len(l.AbortedTxns(0, l.LogEndOffset())); got != 1 {
		t.Fatalf("aborted index after cleaning: %d entries", got)
	}
}

// markers returns the producer ids of the transaction markers in l, in
// offset order.
func markers(t *testing.T, l *Log) []int64 {
	t.Helper()
	var out []int64
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		sl, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.AppendTo(nil)
		if err != nil || len(b) == 0 {
			break
		}
		for len(b) > 0 {
			h, _, rest, err := batch.Next(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.IsControl() {
				out = append(out, h.ProducerID)
			}
			b = rest
		}
		off = sl.NextOffset
	}
	return out
}

// TestCompactionRemovesMarkers: a marker whose transaction has no batch
// left gets a delete horizon and goes once it passed; one whose
// transaction still has a batch (records, or the producer's last batch,
// kept empty) stays; recovery then finds no transaction open.
func TestCompactionRemovesMarkers(t *testing.T) {
	fs := vfs.NewMem()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 1000
	l := mustOpen(t, fs, cfg)
	l.SetTombstoneBound(math.MaxInt64)
	now := t0
	seq := map[int64]int32{}
	txn := func(pid int64, k, v string) {
		seq[pid]++
		if _, err := l.AppendAssigning(batchtest.Build(batchtest.Options{Transactional: true, ProducerID: pid, BaseSequence: seq[pid] - 1, BaseTimestamp: now.UnixMilli()},
			[]batchtest.Record{{Key: []byte(k), Value: []byte(v)}}), 1, now); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAssigning(batch.EncodeMarker(pid, 0, batch.Marker{Commit: true}, now.UnixMilli()), 1, now); err != nil {
			t.Fatal(err)
		}
	}
	// The leader epoch's first batch stays (compact.go, epochStarts): a
	// plain one, so that the transactions below behave as on their own.
	appendKeyed(t, l, now, batch.None, -1, 0, "e", "epoch start")
	txn(1, "k", "superseded")
	appendKeyed(t, l, now, batch.None, -1, 0, "k", "latest") // k's value from outside any transaction
	txn(1, "j", "kept")                                      // producer 1's last batch: kept, even if emptied
	txn(2, "m", "kept")
	for i := 0; i < 30; i++ {
		appendKeyed(t, l, now, batch.None, -1, 0, fmt.Sprintf("filler-%d", i%3), strings.Repeat("f", 60))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	clean := func(at time.Time) {
		t.Helper()
		if _, err := l.Clean(at, l.LogEndOffset(), NewOffsetMap(1<<16), nil); err != nil {
			t.Fatal(err)
		}
	}
	clean(now)
	if got := markers(t, l); !reflect.DeepEqual(got, []int64{1, 1, 2}) {
		t.Fatalf("after the first pass markers of %v, want all three (the first's horizon is ahead)", got)
	}
	clean(now.Add(2 * time.Second)) // past the horizon
	if got := markers(t, l); !reflect.DeepEqual(got, []int64{1, 2}) {
		t.Fatalf("after the horizon markers of %v, want the two whose transactions keep a record", got)
	}
	if mustProducers(t, l).OpenTxns() != 0 {
		t.Fatal("a transaction is open after cleaning")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Recovery from no snapshot replays the cleaned log: nothing reopens.
	names, _ := fs.List("/data/topic-0")
	for _, n := range names {
		if strings.HasSuffix(n, snapshotSuffix) {
			fs.Remove("/data/topic-0/" + n)
		}
	}
	l = mustOpen(t, fs, cfg)
	defer l.Close()
	if n := mustProducers(t, l).OpenTxns(); n != 0 {
		t.Fatalf("%d transactions open after recovery", n)
	}
}

// mustProducers is l's producer state at its end.
func mustProducers(t *testing.T, l *Log) *producer.State {
	t.Helper()
	ps, err := l.ProducerState()
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
