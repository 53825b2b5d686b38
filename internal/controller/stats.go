package controller

import (
	"sync"

	"github.com/sluice-io/sluice/internal/metrics"
)

// Stats counts what this node committed as the active controller: raft
// entries, the records in them and their encoded bytes. Tests and the
// scale measurements (docs/controller.md, "Batching and limits") read
// them; /metrics exports the same counts as
// sluice_controller_metadata_entries_total and
// sluice_controller_metadata_records_total.
type Stats struct {
	// Entries is the number of raft entries (commits) written.
	Entries int64
	// Records is the number of metadata records in them.
	Records int64
	// Bytes is the encoded size of the entries.
	Bytes int64
	// MaxEntryBytes is the largest entry written.
	MaxEntryBytes int64
	// MaxEntryRecords is the most records in one entry.
	MaxEntryRecords int64
}

type statsCounter struct {
	mu sync.Mutex
	s  Stats
}

func (c *statsCounter) note(records, bytes int) {
	c.mu.Lock()
	c.s.Entries++
	c.s.Records += int64(records)
	c.s.Bytes += int64(bytes)
	c.s.MaxEntryBytes = max(c.s.MaxEntryBytes, int64(bytes))
	c.s.MaxEntryRecords = max(c.s.MaxEntryRecords, int64(records))
	c.mu.Unlock()
	metrics.ControllerEntries.Inc()
	metrics.ControllerRecords.Add(float64(records))
}

func (c *statsCounter) get() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// Stats returns the counts of entries and records this node committed as
// the active controller since it started.
func (n *Node) Stats() Stats { return n.stats.get() }
