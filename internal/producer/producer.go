// Package producer tracks idempotent-producer state for one partition, as
// Kafka's ProducerStateManager does (docs/kafka-replication.md §7): per
// producer id, the epoch and the metadata of the last five appended batches.
//
// State is a plain value with no locking and no I/O. The leader calls Check
// before appending a client batch and Update after; followers and recovery
// call Update only (origin REPLICATION skips the checks). Truncation is
// handled by the owner: rebuild from a snapshot at or below the truncation
// point and replay the batches after it.
package producer

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"sort"
)

// BatchesToRetain is how many batches per producer are remembered for
// duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN; clients cap
// max.in.flight.requests.per.connection at 5 for the same reason).
const BatchesToRetain = 5

// MaxProducers bounds the number of producer ids tracked per partition; the
// least recently used id is evicted beyond it.
const MaxProducers = 100_000

// Batch is what is remembered of one appended batch.
type Batch struct {
	FirstSeq    int32
	LastSeq     int32
	FirstOffset int64
	LastOffset  int64
	MaxTime     int64 // batch max timestamp, ms
}

// Entry is the state of one producer id.
type Entry struct {
	ProducerID int64
	Epoch      int16
	Batches    []Batch // oldest first, at most BatchesToRetain
	LastTime   int64   // last append timestamp, ms, for expiry
	// CoordinatorEpoch is the transaction coordinator epoch of the last
	// marker written for this producer, -1 if none: a marker from an older
	// coordinator is fenced (TRANSACTION_COORDINATOR_FENCED).
	CoordinatorEpoch int32
}

// Errors returned by Check.
var (
	// ErrInvalidProducerEpoch: the batch's epoch is older than the stored one.
	ErrInvalidProducerEpoch = errors.New("producer: invalid producer epoch")
	// ErrOutOfOrderSequence: the batch's first sequence does not follow the
	// last one (or a new epoch does not start at 0).
	ErrOutOfOrderSequence = errors.New("producer: out of order sequence")
)

// State holds the producer entries of one partition. The zero value is not
// usable; call NewState.
type State struct {
	m map[int64]*Entry
	// open maps each producer with an ongoing transaction to the offset of
	// its first batch in it (Kafka's currentTxnFirstOffset).
	open map[int64]int64
}

// NewState returns an empty state.
func NewState() *State { return &State{m: make(map[int64]*Entry), open: make(map[int64]int64)} }

// Len is the number of tracked producer ids.
func (s *State) Len() int { return len(s.m) }

// Get returns the entry for pid, or nil.
func (s *State) Get(pid int64) *Entry { return s.m[pid] }

// Check validates a client batch (leader append) against the stored state.
// It returns (dup, nil) with the original batch's metadata when the batch is
// one of the retained batches (the caller must answer with the original
// offsets and append nothing), (nil, nil) when the batch may be appended,
// or an error. A producer with no stored state may start at any sequence.
func (s *State) Check(pid int64, epoch int16, firstSeq, lastSeq int32) (*Batch, error) {
	if pid < 0 {
		return nil, nil
	}
	e := s.m[pid]
	if e == nil {
		return nil, nil
	}
	if epoch < e.Epoch {
		return nil, ErrInvalidProducerEpoch
	}
	if epoch != e.Epoch {
		if firstSeq != 0 {
			return nil, ErrOutOfOrderSequence
		}
		return nil, nil
	}
	for i := range e.Batches {
		b := &e.Batches[i]
		if b.FirstSeq == firstSeq && b.LastSeq == lastSeq {
			dup := *b
			return &dup, nil
		}
	}
	if len(e.Batches) == 0 {
		if firstSeq != 0 {
			return nil, ErrOutOfOrderSequence
		}
		return nil, nil
	}
	last := e.Batches[len(e.Batches)-1].LastSeq
	if !inSequence(last, firstSeq) {
		return nil, ErrOutOfOrderSequence
	}
	return nil, nil
}

// inSequence reports whether next follows last, with wrap-around at MaxInt32.
func inSequence(last, next int32) bool {
	if last == math.MaxInt32 {
		return next == 0
	}
	return next == last+1
}

// Update records an appended batch (leader, follower and recovery alike).
// A newer epoch resets the retained batches.
func (s *State) Update(pid int64, epoch int16, b Batch) {
	if pid < 0 {
		return
	}
	e := s.m[pid]
	if e == nil {
		if len(s.m) >= MaxProducers {
			s.evictOldest()
		}
		e = &Entry{ProducerID: pid, Epoch: epoch, CoordinatorEpoch: -1}
		s.m[pid] = e
	}
	if epoch != e.Epoch {
		// A higher epoch starts afresh; a lower one is only seen on
		// replication after an unclean election and is adopted as Kafka does
		// (it only logs the regression).
		e.Epoch = epoch
		e.Batches = e.Batches[:0]
	}
	if len(e.Batches) == BatchesToRetain {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:BatchesToRetain-1]
	}
	e.Batches = append(e.Batches, b)
	if b.MaxTime > e.LastTime {
		e.LastTime = b.MaxTime
	}
}

func (s *State) evictOldest() {
	var victim int64 = -1
	var oldest int64 = math.MaxInt64
	for pid, e := range s.m {
		if _, open := s.open[pid]; open {
			continue
		}
		if e.LastTime < oldest {
			oldest, victim = e.LastTime, pid
		}
	}
	delete(s.m, victim)
}

// ExpireBefore removes producers whose last append is older than ms
// (producer.id.expiration.ms). A producer with an ongoing transaction is
// kept (Kafka's ProducerStateManager.isProducerExpired).
func (s *State) ExpireBefore(ms int64) {
	for pid, e := range s.m {
		if _, open := s.open[pid]; open {
			continue
		}
		if e.LastTime < ms {
			delete(s.m, pid)
		}
	}
}

// TruncateFrom drops every retained batch at or above offset. It is a
// best-effort rollback used where no snapshot is available: producers left
// with no batches are removed, which is the safe direction (a retry is then
// appended again instead of being reported as a duplicate). A transaction
// that began at or above offset is no longer open; one that began below it
// stays open, and so does its producer. Transactions whose marker was cut
// are reopened by the caller (Reopen).
func (s *State) TruncateFrom(offset int64) {
	for pid, first := range s.open {
		if first >= offset {
			delete(s.open, pid)
		}
	}
	for pid, e := range s.m {
		n := 0
		for _, b := range e.Batches {
			if b.LastOffset < offset {
				e.Batches[n] = b
				n++
			}
		}
		e.Batches = e.Batches[:n]
		if _, open := s.open[pid]; n == 0 && !open {
			delete(s.m, pid)
		}
	}
}

// Clone returns a deep copy.
func (s *State) Clone() *State {
	c := NewState()
	for pid, e := range s.m {
		ce := *e
		ce.Batches = append([]Batch(nil), e.Batches...)
		c.m[pid] = &ce
	}
	for pid, first := range s.open {
		c.open[pid] = first
	}
	return c
}

// Snapshot format: magic "SPS2", u32 count, then per entry: i64 pid, i16
// epoch, i64 lastTime, i32 coordinator epoch, i64 first offset of the
// ongoing transaction (-1: none), u8 nbatches, nbatches * (i32, i32, i64,
// i64, i64); trailer u32 CRC32C of everything before it. "SPS1" (written
// before transactions were served) lacks the two transaction fields and is
// still read.
var (
	snapMagicV1 = [4]byte{'S', 'P', 'S', '1'}
	snapMagic   = [4]byte{'S', 'P', 'S', '2'}
)

const (
	batchSize   = 4 + 4 + 8 + 8 + 8
	entrySizeV1 = 8 + 2 + 8 + 1
	entrySize   = entrySizeV1 + 4 + 8
)

// ErrCorrupt is returned by Decode for a malformed or checksum-failing
// snapshot.
var ErrCorrupt = errors.New("producer: corrupt snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode serializes the state (sorted by producer id, so the bytes are
// deterministic).
func (s *State) Encode() []byte {
	pids := make([]int64, 0, len(s.m))
	for pid := range s.m {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	b := append([]byte(nil), snapMagic[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		e := s.m[pid]
		first, open := s.open[pid]
		if !open {
			first = -1
		}
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastTime))
		b = binary.BigEndian.AppendUint32(b, uint32(e.CoordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(first))
		b = append(b, byte(len(e.Batches)))
		for _, x := range e.Batches {
			b = binary.BigEndian.AppendUint32(b, uint32(x.FirstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(x.LastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(x.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(x.LastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(x.MaxTime))
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Decode parses a snapshot written by Encode (or an SPS1 one).
func Decode(data []byte) (*State, error) {
	if len(data) < 12 {
		return nil, ErrCorrupt
	}
	v2 := [4]byte(data[:4]) == snapMagic
	if !v2 && [4]byte(data[:4]) != snapMagicV1 {
		return nil, ErrCorrupt
	}
	size := entrySizeV1
	if v2 {
		size = entrySize
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, ErrCorrupt
	}
	p := body[4:]
	count := binary.BigEndian.Uint32(p)
	p = p[4:]
	if uint64(count)*uint64(size) > uint64(len(p)) {
		return nil, ErrCorrupt
	}
	s := NewState()
	for i := uint32(0); i < count; i++ {
		if len(p) < size {
			return nil, ErrCorrupt
		}
		e := &Entry{
			ProducerID:       int64(binary.BigEndian.Uint64(p)),
			Epoch:            int16(binary.BigEndian.Uint16(p[8:])),
			LastTime:         int64(binary.BigEndian.Uint64(p[10:])),
			CoordinatorEpoch: -1,
		}
		p = p[18:]
		if v2 {
			e.CoordinatorEpoch = int32(binary.BigEndian.Uint32(p))
			if first := int64(binary.BigEndian.Uint64(p[4:])); first >= 0 {
				s.open[e.ProducerID] = first
			} else if first != -1 {
				return nil, ErrCorrupt
			}
			p = p[12:]
		}
		nb := int(p[0])
		p = p[1:]
		if nb > BatchesToRetain || len(p) < nb*batchSize {
			return nil, ErrCorrupt
		}
		for j := 0; j < nb; j++ {
			e.Batches = append(e.Batches, Batch{
				FirstSeq:    int32(binary.BigEndian.Uint32(p)),
				LastSeq:     int32(binary.BigEndian.Uint32(p[4:])),
				FirstOffset: int64(binary.BigEndian.Uint64(p[8:])),
				LastOffset:  int64(binary.BigEndian.Uint64(p[16:])),
				MaxTime:     int64(binary.BigEndian.Uint64(p[24:])),
			})
			p = p[batchSize:]
		}
		if _, dup := s.m[e.ProducerID]; dup {
			return nil, ErrCorrupt
		}
		s.m[e.ProducerID] = e
	}
	if len(p) != 0 {
		return nil, ErrCorrupt
	}
	return s, nil
}

// LastOffsetsBelow returns, for every tracked producer id, the last offset
// of its newest remembered batch that ends below end: the batch the log
// cleaner keeps (possibly emptied of records) so that this state can be
// rebuilt from the log. With end at the log end it is Kafka's rule (the
// last batch of each producer); a lower end (the cleanable end, which is
// durable) keeps the producer's state even if a crash loses its batches
// above end.
func (s *State) LastOffsetsBelow(end int64) map[int64]int64 {
	out := make(map[int64]int64, len(s.m))
	for pid, e := range s.m {
		for i := len(e.Batches) - 1; i >= 0; i-- {
			if e.Batches[i].LastOffset < end {
				out[pid] = e.Batches[i].LastOffset
				break
			}
		}
	}
	return out
}
