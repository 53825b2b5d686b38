// Package epoch implements the leader-epoch cache: an ordered map from leader
// epoch to the first offset written in that epoch. It follows Kafka's
// LeaderEpochFileCache semantics (docs/kafka-replication.md §3.3):
// assign, truncateFromEnd, truncateFromStart and endOffsetFor.
//
// A Cache is a plain value with no locking and no I/O; the storage layer
// persists it (see Encode / Decode) and the replica state machine reads it.
package epoch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Undefined is the epoch and offset Kafka uses for "unknown" (-1).
const Undefined = -1

// Entry is one epoch and the offset of its first batch.
type Entry struct {
	Epoch       int32
	StartOffset int64
}

// Cache is the leader-epoch cache. The zero value is an empty cache.
// Both columns are strictly increasing.
type Cache struct {
	entries []Entry
}

// New returns a cache holding entries, which must be strictly increasing in
// both epoch and start offset (as produced by Entries or Decode).
func New(entries []Entry) *Cache {
	c := &Cache{}
	for _, e := range entries {
		c.Assign(e.Epoch, e.StartOffset)
	}
	return c
}

// Entries returns a copy of the cache's entries, oldest first.
func (c *Cache) Entries() []Entry {
	return append([]Entry(nil), c.entries...)
}

// Len is the number of entries.
func (c *Cache) Len() int { return len(c.entries) }

// Latest returns the newest entry, or false if the cache is empty.
func (c *Cache) Latest() (Entry, bool) {
	if len(c.entries) == 0 {
		return Entry{Undefined, Undefined}, false
	}
	return c.entries[len(c.entries)-1], true
}

// LatestEpoch returns the newest epoch, or Undefined if the cache is empty.
func (c *Cache) LatestEpoch() int32 {
	e, _ := c.Latest()
	return e.Epoch
}

// Assign records that epoch starts at startOffset. It is ignored when epoch is
// the latest epoch and startOffset is not below the latest start (the common
// case: every batch of an epoch calls Assign). Otherwise every tail entry with
// an epoch >= epoch or a start >= startOffset is removed first, so both
// columns stay strictly increasing. It reports whether the cache changed (the
// caller must then persist it).
func (c *Cache) Assign(epoch int32, startOffset int64) bool {
	if epoch < 0 || startOffset < 0 {
		return false
	}
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.Epoch == epoch && startOffset >= last.StartOffset {
			return false
		}
	}
	i := len(c.entries)
	for i > 0 && (c.entries[i-1].Epoch >= epoch || c.entries[i-1].StartOffset >= startOffset) {
		i--
	}
	c.entries = append(c.entries[:i], Entry{epoch, startOffset})
	return true
}

// TruncateFromEnd removes every entry whose start offset is >= offset. It runs
// on every log truncation, even one that removes no data, because a demoted
// leader may hold an epoch entry with no batches. It reports whether the cache
// changed.
func (c *Cache) TruncateFromEnd(offset int64) bool {
	i := len(c.entries)
	for i > 0 && c.entries[i-1].StartOffset >= offset {
		i--
	}
	changed := i != len(c.entries)
	c.entries = c.entries[:i]
	return changed
}

// TruncateFromStart runs when the log start offset rises to offset: entries
// wholly below offset are dropped, keeping the last epoch that starts at or
// below offset, whose start is moved up to offset. It reports whether the
// cache changed.
func (c *Cache) TruncateFromStart(offset int64) bool {
	keep := -1 // index of the last entry with start <= offset
	for i, e := range c.entries {
		if e.StartOffset <= offset {
			keep = i
		}
	}
	if keep < 0 {
		return false
	}
	changed := keep > 0 || c.entries[keep].StartOffset != offset
	c.entries = append(c.entries[:0], c.entries[keep:]...)
	c.entries[0].StartOffset = offset
	return changed
}

// EndOffsetFor answers "where does epoch end on this log?" as Kafka's
// endOffsetFor(requested, logEndOffset) does (docs/kafka-replication.md §3.3):
//   - requested is the latest epoch: (requested, leo);
//   - requested is below the earliest epoch: (requested, earliest start);
//   - requested lies between known epochs: (largest epoch <= requested,
//     start offset of the next higher epoch);
//   - requested is above every epoch, Undefined, or the cache is empty:
//     (Undefined, Undefined).
func (c *Cache) EndOffsetFor(requested int32, leo int64) (int32, int64) {
	n := len(c.entries)
	if requested == Undefined || n == 0 {
		return Undefined, Undefined
	}
	if requested == c.entries[n-1].Epoch {
		return requested, leo
	}
	if requested < c.entries[0].Epoch {
		return requested, c.entries[0].StartOffset
	}
	if requested > c.entries[n-1].Epoch {
		return Undefined, Undefined
	}
	// Largest i with entries[i].Epoch <= requested; i < n-1 here.
	i := n - 1
	for c.entries[i].Epoch > requested {
		i--
	}
	return c.entries[i].Epoch, c.entries[i+1].StartOffset
}

// EpochFor returns the epoch whose range holds offset, or Undefined if offset
// is below the earliest entry.
func (c *Cache) EpochFor(offset int64) int32 {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if c.entries[i].StartOffset <= offset {
			return c.entries[i].Epoch
		}
	}
	return Undefined
}

// Clone returns an independent copy.
func (c *Cache) Clone() *Cache {
	return &Cache{entries: c.Entries()}
}

// String renders the cache as "[e0@s0 e1@s1 ...]" for traces and tests.
func (c *Cache) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range c.entries {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d@%d", e.Epoch, e.StartOffset)
	}
	b.WriteByte(']')
	return b.String()
}

// checkpointVersion is the version line of the checkpoint text format.
const checkpointVersion = 0

// maxCheckpointEntries bounds Decode so a corrupt file cannot allocate without
// limit.
const maxCheckpointEntries = 1 << 20

// Encode renders the cache in Kafka's leader-epoch-checkpoint text format:
// a version line (0), a count line, then one "epoch startOffset" line per
// entry.
func (c *Cache) Encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// ErrCorrupt is returned by Decode for a malformed checkpoint.
var ErrCorrupt = errors.New("epoch: corrupt leader-epoch checkpoint")

// Decode parses the format written by Encode. Entries that are not strictly
// increasing make the checkpoint corrupt.
func Decode(data []byte) (*Cache, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	v, ok := line()
	if !ok || v != strconv.Itoa(checkpointVersion) {
		return nil, ErrCorrupt
	}
	cs, ok := line()
	if !ok {
		return nil, ErrCorrupt
	}
	count, err := strconv.Atoi(cs)
	if err != nil || count < 0 || count > maxCheckpointEntries {
		return nil, ErrCorrupt
	}
	c := &Cache{}
	for i := 0; i < count; i++ {
		l, ok := line()
		if !ok {
			return nil, ErrCorrupt
		}
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, ErrCorrupt
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 {
			return nil, ErrCorrupt
		}
		if n := len(c.entries); n > 0 && (c.entries[n-1].Epoch >= int32(ep) || c.entries[n-1].StartOffset >= off) {
			return nil, ErrCorrupt
		}
		c.entries = append(c.entries, Entry{int32(ep), off})
	}
	return c, nil
}
