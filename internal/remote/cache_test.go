package remote

import (
	"errors"
	"testing"

	"github.com/sluice-io/sluice/internal/epoch"
)

func TestValidTransition(t *testing.T) {
	all := []SegmentState{-1, CopyStarted, CopyFinished, DeleteStarted, DeleteFinished}
	ok := map[[2]SegmentState]bool{
		{-1, CopyStarted}:          true,
		{CopyStarted, CopyStarted}: true, {CopyStarted, CopyFinished}: true, {CopyStarted, DeleteStarted}: true,
		{CopyFinished, CopyFinished}: true, {CopyFinished, DeleteStarted}: true,
		{DeleteStarted, DeleteStarted}: true, {DeleteStarted, DeleteFinished}: true,
		{DeleteFinished, DeleteFinished}: true,
	}
	for _, from := range all {
		for _, to := range all[1:] {
			if got := ValidTransition(from, to); got != ok[[2]SegmentState{from, to}] {
				t.Errorf("%v → %v: %v", from, to, got)
			}
		}
	}
}

func TestCacheStateMachine(t *testing.T) {
	var c Cache
	s := testSegment()
	s.LeaderEpochs = []epoch.Entry{{Epoch: 2, StartOffset: 100}, {Epoch: 5, StartOffset: 150}}
	up := func(st SegmentState) error {
		return c.Apply(Record{Update: &Update{Partition: s.Partition, ID: s.ID, State: st}})
	}
	if err := up(CopyFinished); !errors.Is(err, ErrUnknownSegment) {
		t.Fatalf("update of an unknown segment: %v", err)
	}
	fin := s
	fin.State = CopyFinished
	if err := c.AddCopyStarted(fin); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("new segment in FINISHED: %v", err)
	}
	if err := c.Apply(Record{Segment: &s}); err != nil {
		t.Fatal(err)
	}
	if len(c.Segments(s.Partition)) != 0 || len(c.All(s.Partition)) != 1 {
		t.Fatal("a STARTED segment is listed as readable")
	}
	if _, ok := c.HighestOffsetForEpoch(s.Partition, 5); ok {
		t.Fatal("highest offset from a STARTED segment")
	}
	if err := up(DeleteFinished); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("STARTED → DELETE_FINISHED: %v", err)
	}
	if err := up(CopyFinished); err != nil {
		t.Fatal(err)
	}
	if err := up(CopyFinished); err != nil {
		t.Fatalf("repeated FINISHED: %v", err)
	}
	if err := up(CopyStarted); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("FINISHED → STARTED: %v", err)
	}
	if segs := c.Segments(s.Partition); len(segs) != 1 || segs[0].State != CopyFinished {
		t.Fatalf("segments %+v", segs)
	}
	if h, ok := c.HighestOffsetForEpoch(s.Partition, 2); !ok || h != 149 {
		t.Fatalf("epoch 2 highest %d %v", h, ok)
	}
	if h, ok := c.HighestOffsetForEpoch(s.Partition, 5); !ok || h != 199 {
		t.Fatalf("epoch 5 highest %d %v", h, ok)
	}
	if err := up(DeleteStarted); err != nil {
		t.Fatal(err)
	}
	if len(c.Segments(s.Partition)) != 0 {
		t.Fatal("a segment being deleted is listed as readable")
	}
	if err := up(CopyFinished); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("DELETE_STARTED → FINISHED: %v", err)
	}
	if err := up(DeleteFinished); err != nil {
		t.Fatal(err)
	}
	if len(c.All(s.Partition)) != 0 {
		t.Fatal("a deleted segment is still held")
	}
	if h, ok := c.HighestOffsetForEpoch(s.Partition, 5); !ok || h != 199 {
		t.Fatalf("highest offset forgotten with the segment: %d %v", h, ok)
	}
	c.DeletePartition(PartitionDelete{Partition: s.Partition, State: PartitionDeleteFinished})
	if _, ok := c.HighestOffsetForEpoch(s.Partition, 5); ok {
		t.Fatal("partition delete kept its state")
	}
}
