package coord

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/storage"
)

// Shard is one coordinator partition led here: its state and its owner.
// Its methods other than Partition, Epoch, Stopped and Post must be called
// on the owner, that is from an event.
type Shard[S any] struct {
	rt    *Runtime[S]
	part  int32
	epoch int32
	r     Replica

	mu      sync.Mutex // guards queue, loading, gone
	queue   []*event[S]
	loading bool
	gone    bool
	wake    chan struct{} // buffered 1: the owner has something to do
	stop    chan struct{} // closed when the shard is unloaded
	exited  chan struct{} // closed when the owner returned

	// Owned by the owner goroutine.
	state   S
	pending []write // appended, not yet committed, in log order
	timers  map[string]*timer[S]
	started bool // stepped: the load and the Loaded hook ran
	// What the state shows may not be committed below these offsets
	// (Read): the log end the load read to, and the end of the last
	// write applied at its append (Shows) and not rolled back.
	loadEnd, shownEnd int64

	// The committer's queue: ends of appended batches to wait for.
	cmu  sync.Mutex
	ends []int64
	kick chan struct{}
}

type event[S any] struct {
	fn       func(*Shard[S])
	enqueued time.Time
	done     chan error // nil for a posted event
}

type write struct {
	end  int64 // the offset after the write's batch
	undo func()
	done func(error)
}

type timer[S any] struct {
	at time.Time
	t  clock.Timer     // nil when stepped
	fn func(*Shard[S]) // stepped: what Step runs once the clock is at at
}

func (t *timer[S]) stop() {
	if t.t != nil {
		t.t.Stop()
	}
}

func newShard[S any](rt *Runtime[S], part, epoch int32, r Replica) *Shard[S] {
	return &Shard[S]{rt: rt, part: part, epoch: epoch, r: r, loading: true,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{}),
		timers: map[string]*timer[S]{}, kick: make(chan struct{}, 1)}
}

// Partition is the shard's partition.
func (s *Shard[S]) Partition() int32 { return s.part }

// Epoch is the leader epoch the shard was elected at (Kafka's coordinator
// epoch).
func (s *Shard[S]) Epoch() int32 { return s.epoch }

// Replica is the replica the shard appends through.
func (s *Shard[S]) Replica() Replica { return s.r }

// State is the shard's state machine (owner only).
func (s *Shard[S]) State() S { return s.state }

// Now is the runtime clock's time.
func (s *Shard[S]) Now() time.Time { return s.rt.cfg.Clock.Now() }

// Stopped is closed when the shard is unloaded: background work started
// by its events stops on it.
func (s *Shard[S]) Stopped() <-chan struct{} { return s.stop }

// Gone reports whether the shard was unloaded.
func (s *Shard[S]) Gone() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// Post queues fn on the shard's owner (from any goroutine) without
// waiting; it runs after the load if the shard is loading. It fails with
// ErrNotCoordinator once the shard is unloaded.
func (s *Shard[S]) Post(fn func(*Shard[S])) error {
	return s.enqueue(&event[S]{fn: fn}, true)
}

// Unload unloads the shard, like Runtime.Resign at its epoch, without
// waiting (events call it when they find the shard stale).
func (s *Shard[S]) Unload() {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	s.rt.unloadLocked(s)
}

func (s *Shard[S]) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// enqueue adds ev to the queue; whenLoaded lets it wait for the load.
func (s *Shard[S]) enqueue(ev *event[S], whenLoaded bool) error {
	ev.enqueued = time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.gone:
		return ErrNotCoordinator
	case s.loading && !whenLoaded:
		return ErrLoading
	}
	s.queue = append(s.queue, ev)
	s.signal()
	return nil
}

// run is the owner goroutine: it loads the state (unless Elect did), then
// runs the queued events in order until the shard is unloaded.
func (s *Shard[S]) run() {
	defer s.rt.owners.Done()
	defer close(s.exited)
	s.mu.Lock()
	loading := s.loading
	s.mu.Unlock()
	if loading && !s.load() {
		return
	}
	if s.Gone() {
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		s.mu.Unlock()
		s.unloaded(q)
		return
	}
	go s.commitLoop()
	if s.rt.cfg.Loaded != nil {
		s.rt.cfg.Loaded(s)
	}
	for {
		s.mu.Lock()
		q, gone := s.queue, s.gone
		s.queue = nil
		s.mu.Unlock()
		if gone {
			s.unloaded(q)
			return
		}
		for i, ev := range q {
			if s.Gone() {
				s.unloaded(q[i:])
				return
			}
			s.runEvent(ev)
		}
		if len(q) == 0 {
			<-s.wake
		}
	}
}

// load replays the partition; false if the shard was unloaded meanwhile
// or the load failed (the shard is then unloaded).
func (s *Shard[S]) load() bool {
	start := time.Now()
	st, err := s.rt.cfg.Load(s.part, s.r)
	s.loadEnd = s.r.LogEndOffset() // at least what the load read
	s.rt.loadTime.Observe(time.Since(start).Seconds())
	if err != nil {
		s.rt.log.Error("loading coordinator shard", "coordinator", s.rt.cfg.Name, "partition", s.part, "err", err)
		s.Unload()
	}
	s.mu.Lock()
	q, gone := s.queue, s.gone
	if !gone {
		s.state, s.loading = st, false
	}
	s.mu.Unlock()
	if gone {
		s.queue = nil
		s.unloaded(q)
		return false
	}
	return true
}

func (s *Shard[S]) runEvent(ev *event[S]) {
	start := time.Now()
	s.rt.queueTime.Observe(start.Sub(ev.enqueued).Seconds())
	ev.fn(s)
	s.rt.procTime.Observe(time.Since(start).Seconds())
	if ev.done != nil {
		ev.done <- nil
	}
}

// unloaded is the owner's last work: timers stop, pending writes and the
// events still queued get ErrNotCoordinator, then the Unloaded hook runs.
func (s *Shard[S]) unloaded(q []*event[S]) {
	for k, t := range s.timers {
		t.stop()
		delete(s.timers, k)
	}
	ws := s.pending
	s.pending = nil
	for _, w := range ws {
		if w.done != nil {
			w.done(ErrNotCoordinator)
		}
	}
	s.mu.Lock()
	q = append(q, s.queue...)
	s.queue = nil
	s.mu.Unlock()
	for _, ev := range q {
		if ev.done != nil {
			ev.done <- ErrNotCoordinator
		}
	}
	if s.rt.cfg.Unloaded != nil && !s.loadingState() {
		s.rt.cfg.Unloaded(s)
	}
}

func (s *Shard[S]) loadingState() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loading
}

// Append appends batch (one encoded record batch) to the partition (owner
// only) and returns where it went. On failure undo runs at once and the
// error is returned (done is not called). Otherwise done runs on the owner
// once the batch is committed (nil), or fails: the commit failed (the
// state is then rolled back to the last committed offset: undo of this and
// every later uncommitted write runs, newest first, before their done) or
// the shard was unloaded (ErrNotCoordinator, no undo: the state is
// dropped). undo and done may be nil.
func (s *Shard[S]) Append(b []byte, undo func(), done func(error)) (storage.AppendInfo, error) {
	if s.Gone() {
		if undo != nil {
			undo()
		}
		return storage.AppendInfo{}, ErrNotCoordinator
	}
	info, err := s.r.Append(b, s.Now())
	if err != nil {
		s.rt.rollbacks.Inc()
		if undo != nil {
			undo()
		}
		return info, err
	}
	if h, herr := batch.ParseHeader(b); herr == nil {
		s.rt.batchRecords.Observe(float64(h.NumRecords))
	}
	s.rt.batchBytes.Observe(float64(len(b)))
	end := info.LastOffset + 1
	s.pending = append(s.pending, write{end: end, undo: undo, done: done})
	if s.rt.cfg.Stepped {
		return info, nil // Step polls the oldest pending write's commit
	}
	s.cmu.Lock()
	s.ends = append(s.ends, end)
	s.cmu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return info, nil
}

// Shows records that the write just appended, ending at end, changed the
// state at its append rather than once committed (owner only): until they
// are committed, or rolled back, a Read waits for them.
func (s *Shard[S]) Shows(end int64) { s.shownEnd = max(s.shownEnd, end) }

// readEnd is the offset below which what the state shows must be
// committed before a read answers from it (owner).
func (s *Shard[S]) readEnd() int64 { return max(s.loadEnd, s.shownEnd) }

// Readable reports whether the state shows only committed records, so a
// read may answer from it at once (owner only): the records the load read
// to the log end, and those of writes applied at their append (Shows), are
// below the high watermark. A coordinator that applies its other writes
// only once committed then shows the state of the last committed offset
// but for the pending marks of writes in flight.
func (s *Shard[S]) Readable() bool { return s.r.HighWatermark() >= s.readEnd() }

// Read calls done on the owner once the state is Readable: at once if it
// is, else once the records it shows are committed (nil), or their commit
// failed (the error; the state is then rolled back to the last committed
// offset, but for records the load read) or the shard was unloaded
// (ErrNotCoordinator). It is the runtime's read operation: Kafka's
// CoordinatorRuntime reads at the last committed offset through timeline
// snapshots (SnapshotRegistry); the runtime instead defers the read until
// what the state shows is committed, and the reader computes its answer
// in done.
func (s *Shard[S]) Read(done func(error)) {
	if s.Gone() {
		done(ErrNotCoordinator)
		return
	}
	end := s.readEnd()
	if s.r.HighWatermark() >= end {
		done(nil)
		return
	}
	s.waitFor(end, done)
}

// Committed calls done on the owner once every record of the partition's
// log as it is now is committed (below the high watermark): at once when
// it is, else as a write with nothing to append would complete (nil, or
// the commit's failure, or ErrNotCoordinator when the shard is unloaded).
// A coordinator answering from its state without writing calls it first:
// that state may come from records a load read above the high watermark,
// or from a write not yet committed, which a coordinator elected next may
// not have. Read waits less: only for what the state shows.
func (s *Shard[S]) Committed(done func(error)) {
	if s.Gone() {
		done(ErrNotCoordinator)
		return
	}
	end := s.r.LogEndOffset()
	if s.r.HighWatermark() >= end {
		done(nil)
		return
	}
	s.waitFor(end, done)
}

// waitFor calls done once the offsets below end are committed, as a write
// with nothing to append ending there (owner): it goes among the pending
// writes in log order.
func (s *Shard[S]) waitFor(end int64, done func(error)) {
	i := sort.Search(len(s.pending), func(i int) bool { return s.pending[i].end > end })
	s.pending = slices.Insert(s.pending, i, write{end: end, done: done})
	if s.rt.cfg.Stepped {
		return // Step polls the oldest pending write's commit
	}
	s.cmu.Lock()
	j := sort.Search(len(s.ends), func(j int) bool { return s.ends[j] >= end })
	if j == len(s.ends) || s.ends[j] != end {
		s.ends = slices.Insert(s.ends, j, end)
	}
	s.cmu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// commitLoop waits, off the owner, for the appended batches to be
// committed, and posts their completion (or failure) to the owner.
func (s *Shard[S]) commitLoop() {
	for {
		select {
		case <-s.kick:
		case <-s.stop:
			return
		}
		for {
			s.cmu.Lock()
			if len(s.ends) == 0 {
				s.cmu.Unlock()
				break
			}
			e := s.ends[0]
			s.cmu.Unlock()
			err := s.r.Commit(e)
			hw := max(s.r.HighWatermark(), e)
			s.cmu.Lock()
			if err != nil {
				s.ends = s.ends[:0]
			} else {
				i := 0
				for i < len(s.ends) && s.ends[i] <= hw {
					i++
				}
				s.ends = s.ends[i:]
			}
			s.cmu.Unlock()
			if err != nil {
				s.Post(func(s *Shard[S]) { s.failed(err) })
			} else {
				s.Post(func(s *Shard[S]) { s.committed(hw) })
			}
		}
	}
}

// committed completes the pending writes below hw (owner).
func (s *Shard[S]) committed(hw int64) {
	i := 0
	for i < len(s.pending) && s.pending[i].end <= hw {
		i++
	}
	done := s.pending[:i]
	s.pending = s.pending[i:]
	for _, w := range done {
		if w.done != nil {
			w.done(nil)
		}
	}
}

// failed rolls the state back to the last committed offset after a
// commit failed (owner): writes below the high watermark complete, every
// other pending write is undone, newest first, then fails with err.
func (s *Shard[S]) failed(err error) {
	s.committed(s.r.HighWatermark())
	ws := s.pending
	s.pending = nil
	if len(ws) == 0 {
		return
	}
	s.rt.rollbacks.Add(float64(len(ws)))
	s.shownEnd = 0 // every write applied at its append is undone
	for i := len(ws) - 1; i >= 0; i-- {
		if ws[i].undo != nil {
			ws[i].undo()
		}
	}
	for _, w := range ws {
		if w.done != nil {
			w.done(err)
		}
	}
}

// Schedule runs fn on the owner at time at (owner only), replacing the
// timer of key if there is one. The clock's callback waits until fn ran
// (as a timer that locks its state would), so a manual clock's Advance
// returns with the event done.
func (s *Shard[S]) Schedule(key string, at time.Time, fn func(*Shard[S])) {
	if old := s.timers[key]; old != nil {
		old.stop()
	}
	tm := &timer[S]{at: at}
	s.timers[key] = tm
	if s.rt.cfg.Stepped {
		tm.fn = fn
		return
	}
	tm.t = s.rt.cfg.Clock.AfterFunc(at.Sub(s.Now()), func() {
		ev := &event[S]{done: make(chan error, 1), fn: func(s *Shard[S]) {
			if s.timers[key] != tm {
				return
			}
			delete(s.timers, key)
			fn(s)
		}}
		if s.enqueue(ev, true) == nil {
			<-ev.done
		}
	})
}

// TimerAt returns when the timer of key fires, if it is armed (owner
// only).
func (s *Shard[S]) TimerAt(key string) (time.Time, bool) {
	if t := s.timers[key]; t != nil {
		return t.at, true
	}
	return time.Time{}, false
}

// Cancel stops the timer of key (owner only).
func (s *Shard[S]) Cancel(key string) {
	if t := s.timers[key]; t != nil {
		t.stop()
		delete(s.timers, key)
	}
}
