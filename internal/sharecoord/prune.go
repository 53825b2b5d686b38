package sharecoord

// Pruning __share_group_state. The topic is not compacted (a share
// partition's updates all have the same key), so the coordinator deletes
// the records no share partition needs any more, as Kafka's
// ShareCoordinatorService does every
// share.coordinator.state.topic.prune.interval.ms: below the last
// snapshot of every share partition nothing is needed to rebuild the
// state. A share partition that was not written to since the previous
// prune (a "cold" one, Kafka's share.coordinator.cold.partition.snapshot.interval.ms)
// would hold that offset back for ever, so each prune first writes a new
// snapshot of each of them; the records they free go at the next prune.
// Only committed state counts: for a share partition with writes in
// flight, the snapshot of its committed state is kept too (a rollback
// returns to it), and nothing at or above the high watermark is deleted.

import (
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/share"
)

// pruneTimer is the shard timer key of the prune.
const pruneTimer = "prune"

// PruneFloor is the lowest offset a replay starting at the high watermark
// hw or below still needs: the lowest last-snapshot offset over the share
// partitions (and over the committed states of those with writes in
// flight), at most hw.
func (s *State) PruneFloor(hw int64) int64 {
	floor := hw
	for _, e := range s.entries {
		floor = min(floor, e.snapOffset)
	}
	for _, fl := range s.pending {
		if fl.base != nil {
			floor = min(floor, fl.base.snapOffset)
		}
	}
	return floor
}

// coldKeys are the share partitions without writes in flight whose last
// snapshot is below before.
func (s *State) coldKeys(before int64) []share.Key {
	var out []share.Key
	for k, e := range s.entries {
		if e.snapOffset < before && s.pending[k] == nil {
			out = append(out, k)
		}
	}
	return out
}

// armPrune schedules the next prune of s (owner).
func (c *Coordinator) armPrune(s *shard) {
	if c.cfg.PruneInterval <= 0 {
		return
	}
	s.Schedule(pruneTimer, c.clock.Now().Add(c.cfg.PruneInterval), c.prune)
}

// prune writes snapshots of the cold share partitions and deletes the
// records below the prune floor (owner); then it arms the next prune.
func (c *Coordinator) prune(s *shard) {
	defer c.armPrune(s)
	st := s.State()
	r := s.Replica()
	hw := r.HighWatermark()
	now := c.clock.Now().UnixMilli()
	cold := st.coldKeys(st.coldBefore)
	for _, k := range cold {
		e := st.entries[k]
		c.write(s, k, []Record{snapshot(k, e, e.st, now)}, func(error) {})
	}
	st.coldBefore = hw
	floor := st.PruneFloor(hw)
	if floor <= r.LogStartOffset() {
		return
	}
	p, ok := r.(*broker.Partition)
	if !ok {
		return
	}
	// DeleteRecords answers once the followers followed; nothing waits
	// for it (the channel is buffered).
	p.DeleteRecords(floor, c.clock.Now().Add(30*time.Second))
	c.log.Debug("pruned share state", "partition", s.Partition(), "log.start.offset", floor, "cold.snapshots", len(cold))
}
