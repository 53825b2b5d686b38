package share

import (
	"bytes"
	"context"
	"sort"
	"time"
)

// Expired locks are persisted, as Kafka's SharePartition does: its
// acquisition lock timer task (releaseAcquisitionLockOnTimeout) moves the
// records of a lock that passed to Available, or to Archived once their
// delivery count reached share.delivery.count.limit, and writes the new
// state batches through writeShareGroupState. Without that write a new
// leader, loading the state from the share coordinator, would start the
// records' delivery counts again from their last persisted values, and
// would deliver again a record archived at the limit.
//
// Kafka makes the records available in memory before the write returns
// and keeps the transition when it fails. sluice releases them in memory
// at once too (the lazy expire of every operation), but does not acquire
// a released record again until a write of the window that holds its
// release succeeded: a delivery count seen by a client never goes back
// after a failover, even when the write failed. Kafka persists nothing at
// acquisition (SharePartition.acquire returns the records without a
// write), and neither does sluice: a record acquired when its leader
// fails is delivered by the next leader with the same delivery count.
//
// The writes are driven from two places: the fetch path persists the
// expired locks of a share partition before it acquires from it, and a
// sweep (Manager.PersistExpired, run by the handlers every
// ExpirySweepInterval, by the simulator on its clock) persists them when
// no fetch comes.

// ExpirySweepInterval is how often the handlers sweep the share partitions
// for expired locks to persist (Kafka fires a timer at each lock's
// deadline instead).
const ExpirySweepInterval = 100 * time.Millisecond

// markUnsynced marks r, just released from Acquired (Available, or
// Archiving or Archived at the delivery limit), as not durable: the next
// write started carries it (write.go).
func (sp *Partition) markUnsynced(r *rec) {
	if r.state == Available || r.state == Archiving {
		r.unsynced = true
	}
	sp.dirty, sp.dirtyAfter = true, sp.gen
}

// synced notes that write number gen succeeded: if it started after the
// last release marked unsynced, the window's releases are all durable,
// the records released may be acquired again and the Archiving ones
// handed to the dead-letter sink. A release marked while gen was in
// flight stays unsynced for the next write.
func (sp *Partition) synced(gen uint64) {
	if !sp.dirty || gen <= sp.dirtyAfter {
		return
	}
	sp.dirty = false
	for i := range sp.recs {
		sp.recs[i].unsynced = false
	}
}

// ExpiryDue reports whether PersistExpired may have something to write as
// of now: a release not yet durable, or a lock deadline passed (by the
// lower bound kept, without a scan of the window; a lock acknowledged
// before it passed makes one PersistExpired find nothing to write).
func (sp *Partition) ExpiryDue(now time.Time) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.dirty {
		return true
	}
	if sp.knobs.KeepExpiredLocks || sp.knobs.SkipExpiryPersist {
		return false
	}
	return !sp.earliest.IsZero() && !now.Before(sp.earliest)
}

// PersistExpired releases the locks that passed before now (expire) and,
// if a release is not durable yet, waits for a write started after it:
// the write collecting transitions (write.go), so that it never runs
// beside another write of the partition. A nil error means every release
// so far is durable. On an error the releases stay in memory, not
// acquirable, for the next call or the next write to persist.
func (sp *Partition) PersistExpired(ctx context.Context, now time.Time) error {
	sp.mu.Lock()
	sp.expire(now)
	sp.earliest = time.Time{}
	for i := range sp.recs {
		if r := &sp.recs[i]; r.state == Acquired && (sp.earliest.IsZero() || r.deadline.Before(sp.earliest)) {
			sp.earliest = r.deadline
		}
	}
	if !sp.dirty {
		sp.mu.Unlock()
		return nil
	}
	p := &Pending{sp: sp, w: sp.pend()}
	sp.mu.Unlock()
	return p.Wait(ctx)
}

// keyLess orders keys by group, topic id and partition.
func keyLess(a, b Key) bool {
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c < 0
	}
	return a.Partition < b.Partition
}

// PersistExpired runs PersistExpired on every held share partition with
// something to write as of now, one after the other, each with its own
// timeout, and returns the partitions whose write failed with their
// errors (the caller drops the fenced ones). The partitions go in key
// order, so that a simulator replays the sweep exactly.
func (m *Manager) PersistExpired(now time.Time, timeout time.Duration) map[*Partition]error {
	m.mu.Lock()
	parts := make([]*Partition, 0, len(m.parts))
	for _, sp := range m.parts {
		parts = append(parts, sp)
	}
	m.mu.Unlock()
	sort.Slice(parts, func(i, j int) bool { return keyLess(parts[i].key, parts[j].key) })
	var failed map[*Partition]error
	for _, sp := range parts {
		if !sp.ExpiryDue(now) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := sp.PersistExpired(ctx, now)
		cancel()
		if err != nil {
			if failed == nil {
				failed = map[*Partition]error{}
			}
			failed[sp] = err
		}
	}
	return failed
}
