package share

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordState is the delivery state of one in-flight record, with Kafka's
// RecordState ids.
type RecordState int8

// The record states of a share partition's in-flight window (Kafka's
// RecordState). Acquired is never persisted: it is written as Available.
const (
	// Available records may be acquired by any member.
	Available RecordState = 0
	// Acquired records are locked for one member until a deadline.
	Acquired RecordState = 1
	// Acknowledged records were accepted; they are never delivered again.
	Acknowledged RecordState = 2
	// Archived records were rejected, reached the delivery limit, or are
	// not deliverable (control records, aborted transactional data,
	// offsets without a record); they are never delivered again.
	Archived RecordState = 4
)

// Acknowledge types of ShareFetch and ShareAcknowledge (KIP-932's
// AcknowledgeType, KIP-1222's renew).
const (
	// AckGap marks offsets without a deliverable record; they are archived.
	AckGap int8 = 0
	// AckAccept acknowledges the records as processed.
	AckAccept int8 = 1
	// AckRelease returns the records for redelivery.
	AckRelease int8 = 2
	// AckReject archives the records as unprocessable.
	AckReject int8 = 3
	// AckRenew extends the acquisition lock (KIP-1222).
	AckRenew int8 = 4
)

// Config are the settings of one share partition, from the group's
// configs and the broker's group.share.* defaults.
type Config struct {
	// LockDuration is share.record.lock.duration.ms, the acquisition lock.
	LockDuration time.Duration
	// DeliveryLimit is share.delivery.count.limit: a record acquired this
	// many times is archived instead of being made available again.
	DeliveryLimit int16
	// MaxInFlight is group.share.partition.max.record.locks: the most
	// offsets in the in-flight window (SPEO - SPSO).
	MaxInFlight int
	// DeadLetters, when set, takes the records rejected or archived at
	// the delivery limit, to copy to the group's dead-letter topic
	// (KIP-1191, deadletter.go); nil archives them at once.
	DeadLetters DeadLetterSink
}

// maxWindowFactor bounds the in-flight window to this many times
// MaxInFlight: a batch taken whole past the limit (Acquire) stops there.
const maxWindowFactor = 4

// Kafka's defaults (GroupCoordinatorConfig / ShareGroupConfig).
const (
	// DefaultLockDuration is group.share.record.lock.duration.ms.
	DefaultLockDuration = 30 * time.Second
	// DefaultDeliveryLimit is group.share.delivery.count.limit.
	DefaultDeliveryLimit = 5
	// DefaultMaxInFlight is group.share.partition.max.record.locks.
	DefaultMaxInFlight = 2000
)

func (c Config) withDefaults() Config {
	if c.LockDuration <= 0 {
		c.LockDuration = DefaultLockDuration
	}
	if c.DeliveryLimit <= 0 {
		c.DeliveryLimit = DefaultDeliveryLimit
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	return c
}

// LogBatch is one record batch read from the partition's log, as
// Acquire sees it: offsets First..Last, and Skip for a batch no member is
// given (a control batch, or under read_committed aborted transactional
// data): its offsets are archived.
type LogBatch struct {
	// First and Last are the batch's base and last offsets.
	First, Last int64
	// Skip archives the batch's offsets instead of acquiring them.
	Skip bool
}

// AcquiredRange is a run of offsets acquired by one ShareFetch with the
// same delivery count (ShareFetchResponse AcquiredRecords).
type AcquiredRange struct {
	// First and Last bound the run, inclusive.
	First, Last int64
	// DeliveryCount is the records' delivery count, this delivery included.
	DeliveryCount int16
}

// AckBatch is one acknowledgement batch: Types has one type for the whole
// range or one per offset.
type AckBatch struct {
	// First and Last bound the range, inclusive.
	First, Last int64
	// Types are the acknowledge types (Ack constants).
	Types []int8
}

// rec is the state of one offset of the in-flight window. unsynced marks
// a record released from Acquired (its lock passed, or its member's
// session closed) whose release is not yet durable: it is not acquired
// again, nor handed to the dead-letter sink, until a write of the window
// succeeds (expiry.go).
type rec struct {
	state    RecordState
	count    int16
	unsynced bool
	member   string
	deadline time.Time
	// dlq is the cause of an Archiving record not yet handed to the
	// dead-letter sink (0 once handed).
	dlq DLQCause
	// pending: the record's last transition (an acknowledgement, a
	// release) waits for its write; until the write returns the record
	// is neither acquired nor acknowledged again, and SPSO does not pass
	// it (a failed write restores its previous state).
	pending bool
}

// Partition is one share partition on its partition leader: Kafka's
// SharePartition. The in-flight window holds the offsets from the
// share-partition start offset (SPSO) to the end offset (SPEO, exclusive)
// one by one; everything below SPSO is acknowledged or archived, and
// everything from SPEO on was never acquired. Locks expire lazily: every
// operation first returns the records whose lock passed to Available (or
// archives them at the delivery limit). The lock is never held across a
// Persister call: transitions waiting for their write are pending
// (write.go). Safe for concurrent use.
type Partition struct {
	mu        sync.Mutex
	key       Key
	cfg       Config
	persister Persister
	// stateEpoch and leaderEpoch fence this partition's writes.
	stateEpoch, leaderEpoch int32
	start                   int64
	recs                    []rec
	// avail is closed when records become Available again (released),
	// waking the long polls waiting on Changed.
	avail chan struct{}
	knobs Knobs

	// dirty is set while a release or archive of an expired lock (or of
	// a member's records) is not durable yet; dirtyAfter is the number of
	// writes started before the last such release (gen then), so that
	// only a write started after it clears dirty. earliest is at most the
	// earliest lock deadline (zero: no lock taken since it was last
	// computed; expiry.go).
	dirty      bool
	dirtyAfter uint64
	earliest   time.Time
	// dlqPending: some Archiving record waits for flushDeadLetters.
	dlqPending bool
	// next collects the transitions applied since the write in flight
	// started; writing is set while a write is in flight, and idle is
	// closed (and replaced) when it returns; gen counts the writes
	// started (write.go).
	next    *pendingWrite
	writing bool
	idle    chan struct{}
	gen     uint64
}

// Knobs re-introduce bugs in the share partitions, for the simulator's
// tests that its invariants catch them (internal/sim). The zero value is
// the correct code.
type Knobs struct {
	// AckBeforeDurable answers acknowledgements without writing them:
	// the new state becomes durable only with a later write (a release,
	// a closed session), so a failover before it undoes confirmed
	// acknowledgements.
	AckBeforeDurable bool
	// KeepExpiredLocks never releases a lock whose deadline passed: a
	// stalled or crashed member's records stay acquired.
	KeepExpiredLocks bool
	// SkipExpiryPersist releases expired locks in memory only, never
	// writing the new delivery state: after a leader failover a record's
	// delivery count goes back to its last persisted value, and a record
	// archived at the delivery limit comes back.
	SkipExpiryPersist bool
}

// Changed returns a channel closed the next time records are released
// (an acknowledgement of type release, or a member's locks released):
// a long-polling share fetch waits on it beside the log.
func (sp *Partition) Changed() <-chan struct{} {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.avail
}

// released wakes the waiters of Changed.
func (sp *Partition) released() {
	close(sp.avail)
	sp.avail = make(chan struct{})
}

// Load reads a share partition's state from p as the leader of leaderEpoch.
// An uninitialized state (StartOffset -1) starts at resetOffset(), the
// offset share.auto.offset.reset names; it is persisted with the first
// acknowledgement.
func Load(ctx context.Context, p Persister, key Key, leaderEpoch int32, cfg Config, resetOffset func() (int64, error)) (*Partition, error) {
	st, err := p.Read(ctx, key, leaderEpoch)
	if err != nil {
		return nil, err
	}
	sp := &Partition{key: key, cfg: cfg.withDefaults(), persister: p, stateEpoch: st.StateEpoch, leaderEpoch: leaderEpoch,
		avail: make(chan struct{}), idle: make(chan struct{})}
	if st.StartOffset < 0 {
		off, err := resetOffset()
		if err != nil {
			return nil, err
		}
		sp.start = off
		return sp, nil
	}
	sp.start = st.StartOffset
	for _, b := range st.Batches {
		if b.LastOffset < sp.start || b.LastOffset < b.FirstOffset {
			continue
		}
		first := max(b.FirstOffset, sp.start)
		if first-sp.start >= int64(sp.cfg.MaxInFlight)*maxWindowFactor {
			break // a corrupt state: keep the window bounded
		}
		for sp.end() < first {
			sp.recs = append(sp.recs, rec{state: Available})
		}
		for o := first; o <= b.LastOffset; o++ {
			r := rec{state: RecordState(b.DeliveryState), count: b.DeliveryCount}
			if r.state != Acknowledged && r.state != Archived && r.state != Archiving {
				r.state = Available
			}
			if i := o - sp.start; i < int64(len(sp.recs)) {
				sp.recs[i] = r
			} else {
				sp.recs = append(sp.recs, r)
			}
		}
	}
	sp.advance()
	sp.restoreDeadLetters()
	return sp, nil
}

// Key returns the partition's key.
func (sp *Partition) Key() Key { return sp.key }

// LeaderEpoch returns the leader epoch the partition was loaded in.
func (sp *Partition) LeaderEpoch() int32 { return sp.leaderEpoch }

// SetConfig replaces the settings (a group config changed); locks already
// held keep their deadlines.
func (sp *Partition) SetConfig(cfg Config) {
	sp.mu.Lock()
	sp.cfg = cfg.withDefaults()
	sp.mu.Unlock()
}

// end is SPEO.
func (sp *Partition) end() int64 { return sp.start + int64(len(sp.recs)) }

// Offsets returns SPSO and SPEO.
func (sp *Partition) Offsets() (start, end int64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.start, sp.end()
}

// expire returns the records whose lock passed before now, as Kafka's
// SharePartition.releaseAcquisitionLockOnTimeout: Available, or Archived
// (Archiving with a dead-letter topic) at the delivery limit. The change
// is in memory and unsynced: the next write carries it (PersistExpired,
// or any acknowledgement; write.go), and the records released are not
// acquired again, nor the Archiving ones handed to the dead-letter sink,
// until a write started after the release succeeded.
func (sp *Partition) expire(now time.Time) {
	for i := range sp.recs {
		r := &sp.recs[i]
		if r.state == Acquired && !now.Before(r.deadline) && !sp.knobs.KeepExpiredLocks {
			sp.makeAvailable(r)
			if !sp.knobs.SkipExpiryPersist {
				sp.markUnsynced(r)
			}
		}
	}
	sp.flushDeadLetters()
	sp.advance()
}

// makeAvailable releases r: Available, or archived once its delivery
// count reached the limit (Kafka's SharePartition, share.delivery.count.limit;
// Archiving with a dead-letter topic).
func (sp *Partition) makeAvailable(r *rec) {
	r.member, r.deadline = "", time.Time{}
	if r.count >= sp.cfg.DeliveryLimit {
		sp.archive(r, CauseDeliveryLimit)
	} else {
		r.state = Available
	}
}

// advance moves SPSO over the acknowledged and archived records at the
// head of the window whose write returned.
func (sp *Partition) advance() {
	n := 0
	for n < len(sp.recs) && (sp.recs[n].state == Acknowledged || sp.recs[n].state == Archived) && !sp.recs[n].pending {
		n++
	}
	if n == 0 {
		return
	}
	sp.start += int64(n)
	sp.recs = append([]rec(nil), sp.recs[n:]...)
}

// AdvanceTo moves SPSO up to logStart when the log's start passed it
// (retention or DeleteRecords): the records below no longer exist and are
// dropped from the window, as Kafka's SharePartition does.
func (sp *Partition) AdvanceTo(logStart int64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.advanceTo(logStart)
}

func (sp *Partition) advanceTo(logStart int64) {
	if logStart <= sp.start {
		return
	}
	n := logStart - sp.start
	if n >= int64(len(sp.recs)) {
		sp.recs = nil
	} else {
		sp.recs = append([]rec(nil), sp.recs[n:]...)
	}
	sp.start = logStart
}

// NextFetchOffset returns the offset to read the log from for the next
// acquisition: the first Available offset of the window, else SPEO. ok is
// false when nothing can be acquired (no Available record and the window
// is full).
func (sp *Partition) NextFetchOffset(now time.Time) (offset int64, ok bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.expire(now)
	for i := range sp.recs {
		if r := sp.recs[i]; r.state == Available && !r.unsynced && !r.pending {
			return sp.start + int64(i), true
		}
	}
	return sp.end(), len(sp.recs) < sp.cfg.MaxInFlight
}

// NextDeadline returns the earliest lock deadline, if any record is
// acquired: a long poll waits no longer, since records then come back.
func (sp *Partition) NextDeadline() (time.Time, bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var d time.Time
	for i := range sp.recs {
		if r := sp.recs[i]; r.state == Acquired && (d.IsZero() || r.deadline.Before(d)) {
			d = r.deadline
		}
	}
	return d, !d.IsZero()
}

// Acquire locks Available records of batches (read from the log from
// offset from, NextFetchOffset's, in offset order) for member until now
// plus the lock duration, at most maxRecords of them (maxRecords <= 0: no
// bound). Without strict (KIP-1206 batch_optimized), the batch that
// reaches maxRecords is acquired whole; with strict (record_limit)
// acquisition stops at maxRecords exactly. Offsets from on that no batch
// holds (compacted away) and the offsets of Skip batches are archived:
// they are never delivered. The window grows past MaxInFlight offsets
// only to take whole, without strict, a batch that starts inside it (at
// most to 4 times MaxInFlight).
func (sp *Partition) Acquire(member string, now time.Time, from int64, batches []LogBatch, maxRecords int, strict bool) []AcquiredRange {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.expire(now)
	deadline := now.Add(sp.cfg.LockDuration)
	if sp.earliest.IsZero() || deadline.Before(sp.earliest) {
		sp.earliest = deadline
	}
	var out []AcquiredRange
	n := 0
	add := func(o int64, count int16) {
		if k := len(out) - 1; k >= 0 && out[k].Last == o-1 && out[k].DeliveryCount == count {
			out[k].Last = o
			return
		}
		out = append(out, AcquiredRange{First: o, Last: o, DeliveryCount: count})
	}
	full := func() bool { return maxRecords > 0 && n >= maxRecords }
	// at returns offset o's record, growing the window to it up to limit
	// offsets; nil past it.
	at := func(o int64, limit int) *rec {
		for sp.end() <= o {
			if len(sp.recs) >= limit {
				return nil
			}
			sp.recs = append(sp.recs, rec{state: Available})
		}
		return &sp.recs[o-sp.start]
	}
	cursor := max(from, sp.start)
	for _, b := range batches {
		if full() || b.Last < cursor || b.Last < b.First {
			continue
		}
		// Offsets between the previous batch and this one hold no record.
		for o := cursor; o < b.First; o++ {
			r := at(o, sp.cfg.MaxInFlight)
			if r == nil {
				break
			}
			if r.state == Available && !r.pending {
				r.state = Archived
			}
		}
		// A batch that starts inside the window is taken whole under
		// batch_optimized, even past MaxInFlight, as Kafka's
		// SharePartition acquires the batch that reaches the in-flight
		// limit whole (the limit is checked before acquiring); at most
		// to maxWindowFactor times the limit, which Load relies on.
		limit := sp.cfg.MaxInFlight
		if first := max(b.First, cursor); !strict && first < sp.start+int64(limit) {
			limit *= maxWindowFactor
		}
		stopped := false
		for o := max(b.First, cursor); o <= b.Last; o++ {
			if strict && full() {
				stopped = true
				break
			}
			r := at(o, limit)
			if r == nil {
				stopped = true
				break
			}
			cursor = o + 1
			if r.state != Available || r.unsynced || r.pending {
				continue
			}
			if b.Skip {
				r.state = Archived
				continue
			}
			r.state, r.member, r.deadline = Acquired, member, deadline
			r.count++
			n++
			add(o, r.count)
		}
		if stopped {
			break
		}
	}
	sp.advance()
	return out
}

// errInvalidRequest is an acknowledgement batch that is malformed.
var errInvalidRequest = kerr.InvalidRequest

// CheckAcks validates acknowledgement batches as Kafka's KafkaApis does
// before handing them to the share partition: each range ordered and
// after the previous one, one type or one per offset, each type known
// (renew only if renew is allowed: IsRenewAck). It returns INVALID_REQUEST.
func CheckAcks(acks []AckBatch, renew bool) error {
	next := int64(-1)
	for _, a := range acks {
		if a.First < 0 || a.Last < a.First || a.First < next {
			return fmt.Errorf("%w: acknowledgement range %d-%d out of order or overlapping", errInvalidRequest, a.First, a.Last)
		}
		next = a.Last + 1
		if n := a.Last - a.First + 1; len(a.Types) != 1 && int64(len(a.Types)) != n {
			return fmt.Errorf("%w: %d acknowledge types for %d offsets", errInvalidRequest, len(a.Types), n)
		}
		for _, t := range a.Types {
			if t < AckGap || t > AckRenew || t == AckRenew && !renew {
				return fmt.Errorf("%w: acknowledge type %d", errInvalidRequest, t)
			}
		}
	}
	return nil
}

// Acknowledge applies member's acknowledgements (Ack) and waits until
// they are durable (Pending.Wait). A nil error means the acknowledgement
// is durable; on a failed write its transitions are undone and the
// write's error returned.
func (sp *Partition) Acknowledge(ctx context.Context, member string, now time.Time, acks []AckBatch, renew bool) error {
	p, err := sp.Ack(member, now, acks, renew)
	if err != nil {
		return err
	}
	return p.Wait(ctx)
}

// Ack applies member's acknowledgements in memory: accept acknowledges,
// release makes Available again (or archives at the delivery limit),
// reject and gap archive, renew extends the lock. Every offset must be
// acquired by member with its lock not yet expired, else nothing changes
// and the error is INVALID_RECORD_STATE. The records changed are pending
// until the write that carries them returns (Pending.Wait): they are not
// acquired again meanwhile, as Kafka's SharePartition holds a record
// under an ongoing state transition, and a failed write restores them.
func (sp *Partition) Ack(member string, now time.Time, acks []AckBatch, renew bool) (*Pending, error) {
	if err := CheckAcks(acks, renew); err != nil {
		return nil, err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.expire(now)
	for _, a := range acks {
		if a.First < sp.start || a.Last >= sp.end() {
			return nil, fmt.Errorf("%w: offsets %d-%d outside the in-flight window %d-%d", kerr.InvalidRecordState, a.First, a.Last, sp.start, sp.end())
		}
		for o := a.First; o <= a.Last; o++ {
			if r := sp.recs[o-sp.start]; r.state != Acquired || r.member != member {
				return nil, fmt.Errorf("%w: offset %d is not acquired by this member", kerr.InvalidRecordState, o)
			}
		}
	}
	var w *pendingWrite
	durable := true
	for _, a := range acks {
		for o := a.First; o <= a.Last; o++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[o-a.First]
			}
			r := &sp.recs[o-sp.start]
			if t == AckRenew {
				r.deadline = now.Add(sp.cfg.LockDuration)
				continue
			}
			if sp.knobs.AckBeforeDurable {
				durable = false
			} else {
				if w == nil {
					w = sp.pend()
				}
				w.save(o, r)
			}
			switch t {
			case AckAccept:
				r.state, r.member, r.deadline = Acknowledged, "", time.Time{}
			case AckRelease:
				sp.makeAvailable(r)
			case AckReject:
				sp.archive(r, CauseRejected)
			case AckGap:
				r.state, r.member, r.deadline = Archived, "", time.Time{}
			}
		}
	}
	if !durable {
		// Knobs.AckBeforeDurable: answered without a write.
		sp.advance()
		sp.flushDeadLetters()
		sp.released()
	}
	return &Pending{sp: sp, w: w}, nil
}

// ReleaseMember makes every record member holds Available again (or
// archives it at the delivery limit), and persists the state if anything
// changed: a share session closed, or its connection went away (Kafka's
// SharePartition.releaseAcquiredRecords). The releases are unsynced, as
// an expired lock's (expiry.go): they go with the partition's next write
// (write.go), and the records are not acquired again, nor handed to the
// dead-letter sink, until a write carrying them succeeded. If the write
// fails the records stay released but unsynced (PersistExpired retries
// the write).
func (sp *Partition) ReleaseMember(ctx context.Context, member string, now time.Time) error {
	sp.mu.Lock()
	sp.expire(now)
	changed := false
	for i := range sp.recs {
		if r := &sp.recs[i]; r.state == Acquired && r.member == member {
			sp.makeAvailable(r)
			sp.markUnsynced(r)
			changed = true
		}
	}
	if !changed {
		sp.mu.Unlock()
		return nil
	}
	sp.advance()
	p := &Pending{sp: sp, w: sp.pend()}
	sp.mu.Unlock()
	return p.Wait(ctx)
}

// State returns the window as a persister state.
func (sp *Partition) State() State {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.state()
}

// state builds the persisted form: runs of equal (state, delivery count)
// other than Available never delivered. Acquired is written as Available
// with the delivery count before its acquisition: an acquisition is not
// persisted (Kafka's SharePartition.acquire writes nothing, and its writes
// carry only the records leaving Acquired), so a new leader delivers the
// record with the same count again, never past share.delivery.count.limit.
// Pending transitions are written as done (the write being built carries
// them), so the start offset passes pending acknowledged and archived
// records at the head of the window; an Archiving record stops it (its
// copy to the dead-letter topic is not done).
func (sp *Partition) state() State {
	head := 0
	for head < len(sp.recs) && (sp.recs[head].state == Acknowledged || sp.recs[head].state == Archived) {
		head++
	}
	st := State{StateEpoch: sp.stateEpoch, LeaderEpoch: sp.leaderEpoch, StartOffset: sp.start + int64(head)}
	for i, r := range sp.recs[head:] {
		s, count := int8(r.state), r.count
		if r.state == Acquired {
			s, count = StateAvailable, count-1
		}
		if r.state == Acknowledged || r.state == Archived {
			st.DeliveryCompleteCount++
		}
		if s == StateAvailable && count == 0 {
			continue
		}
		o := st.StartOffset + int64(i)
		if k := len(st.Batches) - 1; k >= 0 && st.Batches[k].LastOffset == o-1 && st.Batches[k].DeliveryState == s && st.Batches[k].DeliveryCount == count {
			st.Batches[k].LastOffset = o
			continue
		}
		st.Batches = append(st.Batches, StateBatch{FirstOffset: o, LastOffset: o, DeliveryState: s, DeliveryCount: count})
	}
	return st
}

// RecordInfo is one in-flight offset's state, for tests and status pages.
type RecordInfo struct {
	// Offset is the record's offset.
	Offset int64
	// State is its delivery state.
	State RecordState
	// DeliveryCount is how many times it was acquired.
	DeliveryCount int16
	// Member holds an Acquired record.
	Member string
	// Deadline is an Acquired record's lock deadline.
	Deadline time.Time
}

// Window returns the in-flight window as of now (expired locks released).
func (sp *Partition) Window(now time.Time) []RecordInfo {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.expire(now)
	out := make([]RecordInfo, len(sp.recs))
	for i, r := range sp.recs {
		out[i] = RecordInfo{Offset: sp.start + int64(i), State: r.state, DeliveryCount: r.count, Member: r.member, Deadline: r.deadline}
	}
	return out
}
