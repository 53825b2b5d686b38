// Package sharetest holds the conformance test every share.Persister
// passes: the in-memory MemPersister and the share coordinator's
// Persister (internal/sharecoord) run the same table.
package sharetest

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/share"
)

// PersisterConformance runs the Persister contract against p. Each
// subtest uses its own keys (group prefix plus the subtest), so p may be
// shared and may hold other state. Writes carry the share partition's
// whole in-flight window at or above the start offset, as share
// partitions write, so that a persister merging batches
// (share.Combine) and one replacing them agree.
//
// The keys are partitions 0..7 of the topic topicID (a persister may
// refuse reads and writes of partitions its metadata does not have).
func PersisterConformance(t *testing.T, p share.Persister, groupPrefix string, topicID [16]byte) {
	key := func(name string, part int32) share.Key {
		return share.Key{Group: groupPrefix + "-" + name, TopicID: topicID, Partition: part}
	}
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return c
	}
	b := func(f, l int64, s int8, c int16) share.StateBatch {
		return share.StateBatch{FirstOffset: f, LastOffset: l, DeliveryState: s, DeliveryCount: c}
	}
	read := func(t *testing.T, k share.Key, leaderEpoch int32) share.State {
		t.Helper()
		st, err := p.Read(ctx(t), k, leaderEpoch)
		if err != nil {
			t.Fatalf("Read(%v): %v", k, err)
		}
		return st
	}
	summary := func(t *testing.T, k share.Key) share.Summary {
		t.Helper()
		s, err := p.ReadSummary(ctx(t), k)
		if err != nil {
			t.Fatalf("ReadSummary(%v): %v", k, err)
		}
		return s
	}
	write := func(t *testing.T, k share.Key, st share.State) {
		t.Helper()
		if err := p.Write(ctx(t), k, st); err != nil {
			t.Fatalf("Write(%v, %+v): %v", k, st, err)
		}
	}
	checkBatches := func(t *testing.T, got share.State, start int64, want ...share.StateBatch) {
		t.Helper()
		if got.StartOffset != start || !reflect.DeepEqual(append([]share.StateBatch(nil), got.Batches...), append([]share.StateBatch(nil), want...)) {
			t.Fatalf("state start %d batches %v, want start %d batches %v", got.StartOffset, got.Batches, start, want)
		}
	}

	t.Run("uninitialized", func(t *testing.T) {
		k := key("uninit", 0)
		if st := read(t, k, 0); st.StartOffset != -1 || len(st.Batches) != 0 {
			t.Fatalf("uninitialized read = %+v", st)
		}
		if s := summary(t, k); s.StartOffset != -1 {
			t.Fatalf("uninitialized summary = %+v", s)
		}
		if err := p.Delete(ctx(t), k); err != nil {
			t.Fatalf("Delete of nothing: %v", err)
		}
	})

	t.Run("initialize", func(t *testing.T) {
		k := key("init", 1)
		if err := p.Initialize(ctx(t), k, 3, 42); err != nil {
			t.Fatal(err)
		}
		st := read(t, k, 0)
		if st.StateEpoch != 3 {
			t.Fatalf("state epoch %d, want 3", st.StateEpoch)
		}
		checkBatches(t, st, 42)
		if s := summary(t, k); s.StateEpoch != 3 || s.StartOffset != 42 {
			t.Fatalf("summary = %+v", s)
		}
	})

	t.Run("write and read", func(t *testing.T) {
		k := key("write", 2)
		if err := p.Initialize(ctx(t), k, 0, 0); err != nil {
			t.Fatal(err)
		}
		read(t, k, 1)
		write(t, k, share.State{StateEpoch: 0, LeaderEpoch: 1, StartOffset: 0, DeliveryCompleteCount: 5,
			Batches: []share.StateBatch{b(0, 4, share.StateAcknowledged, 1), b(5, 9, share.StateAvailable, 1)}})
		checkBatches(t, read(t, k, 1), 0, b(0, 4, share.StateAcknowledged, 1), b(5, 9, share.StateAvailable, 1))
		// The start offset moves past the acknowledged records; the
		// window's later records change.
		write(t, k, share.State{StateEpoch: 0, LeaderEpoch: 1, StartOffset: 5, DeliveryCompleteCount: 3,
			Batches: []share.StateBatch{b(5, 6, share.StateAvailable, 2), b(7, 9, share.StateArchived, 2)}})
		st := read(t, k, 1)
		checkBatches(t, st, 5, b(5, 6, share.StateAvailable, 2), b(7, 9, share.StateArchived, 2))
		if st.LeaderEpoch != 1 {
			t.Fatalf("leader epoch %d, want 1", st.LeaderEpoch)
		}
		if s := summary(t, k); s.StartOffset != 5 || s.LeaderEpoch != 1 || s.DeliveryCompleteCount != 3 {
			t.Fatalf("summary = %+v", s)
		}
	})

	t.Run("fencing", func(t *testing.T) {
		k := key("fence", 3)
		if err := p.Initialize(ctx(t), k, 2, 0); err != nil {
			t.Fatal(err)
		}
		write(t, k, share.State{StateEpoch: 2, LeaderEpoch: 5, StartOffset: 0, DeliveryCompleteCount: 0})
		if err := p.Write(ctx(t), k, share.State{StateEpoch: 2, LeaderEpoch: 4, StartOffset: 3, DeliveryCompleteCount: 0}); err == nil {
			t.Fatal("write from an older leader epoch was not fenced")
		}
		if err := p.Write(ctx(t), k, share.State{StateEpoch: 1, LeaderEpoch: 5, StartOffset: 3, DeliveryCompleteCount: 0}); err == nil {
			t.Fatal("write at an older state epoch was not fenced")
		}
		if st := read(t, k, 5); st.StartOffset != 0 {
			t.Fatalf("a fenced write changed the state: %+v", st)
		}
		// Re-initializing at the next state epoch (AlterShareGroupOffsets)
		// fences the writers of the previous one.
		if err := p.Initialize(ctx(t), k, 3, 100); err != nil {
			t.Fatal(err)
		}
		if err := p.Write(ctx(t), k, share.State{StateEpoch: 2, LeaderEpoch: 6, StartOffset: 7, DeliveryCompleteCount: 0}); err == nil {
			t.Fatal("write of the previous state epoch was not fenced")
		}
		st := read(t, k, 6)
		if st.StateEpoch != 3 {
			t.Fatalf("state epoch %d, want 3", st.StateEpoch)
		}
		checkBatches(t, st, 100)
	})

	t.Run("delete", func(t *testing.T) {
		k := key("delete", 4)
		if err := p.Initialize(ctx(t), k, 0, 9); err != nil {
			t.Fatal(err)
		}
		write(t, k, share.State{StateEpoch: 0, LeaderEpoch: 0, StartOffset: 9, DeliveryCompleteCount: 0,
			Batches: []share.StateBatch{b(9, 9, share.StateArchived, 3)}})
		if err := p.Delete(ctx(t), k); err != nil {
			t.Fatal(err)
		}
		if st := read(t, k, 0); st.StartOffset != -1 || len(st.Batches) != 0 {
			t.Fatalf("read after delete = %+v", st)
		}
		if s := summary(t, k); s.StartOffset != -1 {
			t.Fatalf("summary after delete = %+v", s)
		}
	})

	t.Run("keys are independent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range int32(8) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := key("many", i)
				if err := p.Initialize(ctx(t), k, 0, int64(i)); err != nil {
					errs <- err
					return
				}
				for j := range int64(5) {
					st := share.State{StateEpoch: 0, LeaderEpoch: 0, StartOffset: int64(i) + j, DeliveryCompleteCount: 0,
						Batches: []share.StateBatch{b(int64(i)+j, int64(i)+j+2, share.StateAvailable, int16(j+1))}}
					if err := p.Write(ctx(t), k, st); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i := range int32(8) {
			st := read(t, key("many", i), 0)
			checkBatches(t, st, int64(i)+4, b(int64(i)+4, int64(i)+6, share.StateAvailable, 5))
		}
	})
}
