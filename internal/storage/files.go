package storage

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/vfs"
)

// File names inside a partition directory.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	snapshotSuffix  = ".snapshot"
	tmpSuffix       = ".tmp"

	epochCheckpointName    = "leader-epoch-checkpoint"
	logStartName           = "log-start-offset"
	recoveryPointName      = "recovery-point-offset-checkpoint"
	cleanShutdownName      = ".clean-shutdown"
	maxCheckpointFileBytes = 64 << 20 // leader-epoch-checkpoint, small files
	maxSnapshotFileBytes   = 256 << 20
	maxIndexFileBytes      = 256 << 20
)

// minBatchSize is the smallest possible v2 batch (a header, no records).
const minBatchSize = 61

// fileName is the Kafka-style name of a per-offset file: the offset as 20
// zero-padded digits plus suffix.
func fileName(dir string, offset int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, suffix))
}

// parseFileName returns the offset in a name produced by fileName with the
// given suffix.
func parseFileName(name, suffix string) (int64, bool) {
	if !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	digits := strings.TrimSuffix(name, suffix)
	if len(digits) != 20 {
		return 0, false
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || off < 0 {
		return 0, false
	}
	return off, true
}

// errBadCheckpoint reports a malformed offset checkpoint file.
var errBadCheckpoint = errors.New("storage: corrupt offset checkpoint")

// encodeOffsetFile renders the single-offset checkpoint format used by
// log-start-offset and recovery-point-offset-checkpoint: a version line
// "0" and the offset, each followed by a newline.
func encodeOffsetFile(off int64) []byte {
	return []byte("0\n" + strconv.FormatInt(off, 10) + "\n")
}

// decodeOffsetFile parses encodeOffsetFile's format. Anything else,
// including a torn file, is errBadCheckpoint.
func decodeOffsetFile(b []byte) (int64, error) {
	if len(b) > 64 {
		return 0, errBadCheckpoint
	}
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) != 3 || string(lines[0]) != "0" || len(lines[2]) != 0 {
		return 0, errBadCheckpoint
	}
	off, err := strconv.ParseInt(string(lines[1]), 10, 64)
	if err != nil || off < 0 || strconv.FormatInt(off, 10) != string(lines[1]) {
		return 0, errBadCheckpoint // only the canonical form is accepted
	}
	return off, nil
}

// readOffsetFile reads an offset checkpoint; ok is false when it is missing
// or unreadable (the caller falls back to a safe default).
func readOffsetFile(fsys vfs.FS, name string) (int64, bool) {
	b, err := vfs.ReadFile(fsys, name, 64)
	if err != nil {
		return 0, false
	}
	off, err := decodeOffsetFile(b)
	return off, err == nil
}
