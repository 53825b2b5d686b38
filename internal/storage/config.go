package storage

import (
	"fmt"
	"math"
)

// Config holds the per-partition log settings, named after Kafka's topic
// configs. Sizes are bytes, durations milliseconds.
type Config struct {
	// SegmentBytes (segment.bytes) is the size at which the active segment
	// is rolled. At most math.MaxInt32, since index positions are 32-bit.
	// Default 1 GiB.
	SegmentBytes int64
	// SegmentMs (segment.ms) rolls a segment once its first batch's max
	// timestamp (or, without timestamps, its creation time) is this old
	// relative to the batch being appended. Default 7 days.
	SegmentMs int64
	// IndexIntervalBytes (index.interval.bytes) is roughly how many bytes of
	// batches separate two offset-index entries. Smaller means faster
	// lookups and larger indexes. Default 4096.
	IndexIntervalBytes int
	// SegmentIndexBytes (segment.index.bytes) bounds each index file; the
	// segment is rolled when its offset or time index is full. Default
	// 10 MiB.
	SegmentIndexBytes int
	// Delete is true when cleanup.policy contains "delete": only then do
	// retention.ms and retention.bytes delete segments (Kafka's
	// LogConfig.delete; UnifiedLog.deleteOldSegments). A compact-only log
	// loses segments only below its log start (DeleteRecords). Default
	// true.
	Delete bool
	// RemoteStorage is remote.storage.enable (KIP-405, default false): the
	// segments below the local log start live in the remote log, so the
	// log start may stay below the first local segment (DeleteLocalBelow,
	// and recovery keeps the persisted log start).
	RemoteStorage bool
	// RemoteCopyDisable is remote.log.copy.disable (KIP-950, default
	// false): with RemoteStorage, nothing more is copied to the remote log,
	// and local retention follows RetentionMs and RetentionBytes instead
	// of the local.retention.* values, deleting local segments whether
	// copied or not (ApplyLocalRetention).
	RemoteCopyDisable bool
	// LocalRetentionMs and LocalRetentionBytes are local.retention.ms and
	// local.retention.bytes, already resolved (-2 replaced by RetentionMs
	// and RetentionBytes; -1 unlimited): with RemoteStorage, how long and
	// how much of the log the local disk keeps once copied to the remote
	// log (ApplyLocalRetention).
	LocalRetentionMs, LocalRetentionBytes int64
	// Compact is true when cleanup.policy contains "compact": the log
	// cleaner keeps the latest record of each key. Default false.
	Compact bool
	// DeleteRetentionMs (delete.retention.ms): a tombstone is kept this
	// long after the cleaner first cleaned it (KIP-534), then dropped.
	// Default 86400000 (1 day).
	DeleteRetentionMs int64
	// MinCompactionLagMs (min.compaction.lag.ms): a record newer than this
	// is never cleaned (the cleanable section ends at the first segment
	// holding a newer record). Default 0.
	MinCompactionLagMs int64
	// MaxCompactionLagMs (max.compaction.lag.ms): a log whose oldest dirty
	// record is older than this is cleaned whatever its dirty ratio
	// (KIP-354). Default math.MaxInt64 (never).
	MaxCompactionLagMs int64
	// MinCleanableDirtyRatio (min.cleanable.dirty.ratio): a log is cleaned
	// once dirty bytes / cleanable bytes reach this, in [0, 1]. Default 0.5.
	MinCleanableDirtyRatio float64
	// RetentionMs (retention.ms): segments whose newest timestamp is older
	// than this are deleted by ApplyRetention when Delete is set. -1 means
	// unlimited. Default 7 days.
	RetentionMs int64
	// RetentionBytes (retention.bytes): ApplyRetention deletes the oldest
	// segments while the log is larger than this, when Delete is set. -1 means unlimited
	// (the default).
	RetentionBytes int64
	// FileDeleteDelayMs (file.delete.delay.ms): a deleted segment's names
	// disappear at once, but its open files are closed only this long
	// after (as measured by the times passed to the Log), so reads in
	// flight stay valid. Default 60000.
	FileDeleteDelayMs int64
	// ProducerIDExpirationMs (producer.id.expiration.ms): idempotent
	// producer state not updated for this long is dropped by
	// ApplyRetention. Default 86400000 (1 day).
	ProducerIDExpirationMs int64
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		Delete:                 true,
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * 3600 * 1000,
		IndexIntervalBytes:     4096,
		SegmentIndexBytes:      10 << 20,
		RetentionMs:            7 * 24 * 3600 * 1000,
		RetentionBytes:         -1,
		LocalRetentionMs:       7 * 24 * 3600 * 1000,
		LocalRetentionBytes:    -1,
		FileDeleteDelayMs:      60000,
		ProducerIDExpirationMs: 86400000,
		DeleteRetentionMs:      86400000,
		MaxCompactionLagMs:     math.MaxInt64,
		MinCleanableDirtyRatio: 0.5,
	}
}

// minSegmentBytes is the smallest accepted segment.bytes (Kafka: 14 bytes,
// a legacy record header; we require room for one v2 batch header).
const minSegmentBytes = 61

// Validate reports a setting outside its allowed range.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < minSegmentBytes || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("storage: segment.bytes %d out of range [%d, %d]", c.SegmentBytes, minSegmentBytes, math.MaxInt32)
	case c.SegmentMs < 1:
		return fmt.Errorf("storage: segment.ms %d must be positive", c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("storage: index.interval.bytes %d must not be negative", c.IndexIntervalBytes)
	case c.SegmentIndexBytes < 2*timeEntrySize:
		return fmt.Errorf("storage: segment.index.bytes %d too small", c.SegmentIndexBytes)
	case c.RetentionMs < -1:
		return fmt.Errorf("storage: retention.ms %d invalid", c.RetentionMs)
	case c.RetentionBytes < -1:
		return fmt.Errorf("storage: retention.bytes %d invalid", c.RetentionBytes)
	case c.FileDeleteDelayMs < 0:
		return fmt.Errorf("storage: file.delete.delay.ms %d invalid", c.FileDeleteDelayMs)
	case c.DeleteRetentionMs < 0:
		return fmt.Errorf("storage: delete.retention.ms %d invalid", c.DeleteRetentionMs)
	case c.MinCompactionLagMs < 0 || c.MaxCompactionLagMs < 1:
		return fmt.Errorf("storage: compaction lags %d/%d invalid", c.MinCompactionLagMs, c.MaxCompactionLagMs)
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("storage: min.cleanable.dirty.ratio %v outside [0, 1]", c.MinCleanableDirtyRatio)
	case c.ProducerIDExpirationMs < 1:
		return fmt.Errorf("storage: producer.id.expiration.ms %d invalid", c.ProducerIDExpirationMs)
	}
	return nil
}

// maxIndexEntries is how many entries an index of this config may hold.
func (c Config) maxIndexEntries() int { return c.SegmentIndexBytes / offsetEntrySize }

func (c Config) maxTimeEntries() int { return c.SegmentIndexBytes / timeEntrySize }
