package storage

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/vfs"
)

// The cleaner's swap (docs/compaction.md, "Crash safety"). A group of
// segments [base, end) is replaced by one cleaned segment named after base:
//
//  1. the new files are written as <base>.log.cleaned, .index.cleaned and
//     .timeindex.cleaned and fsynced;
//  2. they are renamed to .swap, and the manifest cleaner-swap, holding
//     "base end", is written atomically and durably: the commit point;
//  3. the .swap files are renamed over <base>.log/.index/.timeindex and
//     the other old segments of [base, end) are removed; directory fsync;
//  4. the manifest is removed; directory fsync.
//
// Recovery (finishSwap) redoes 3 and 4 when the manifest exists, and
// otherwise removes any .cleaned and .swap file: a crash before the commit
// point leaves the old segments, a crash after it the new one.
const (
	cleanedSuffix         = ".cleaned"
	swapSuffix            = ".swap"
	cleanerSwapName       = "cleaner-swap"
	cleanerCheckpointName = "cleaner-offset-checkpoint"
)

var segmentSuffixes = []string{indexSuffix, timeIndexSuffix, logSuffix} // log last: it names the segment

// openCleaned creates the .cleaned files of a segment at base.
func openCleaned(fsys vfs.FS, dir string, base int64) (*segment, error) {
	s := &segment{base: base, dir: dir, fs: fsys, next: base, maxTs: -1, maxTsAt: -1, firstTs: -1}
	var err error
	files := []*vfs.File{&s.idx, &s.tidx, &s.log}
	for i, suf := range segmentSuffixes {
		if *files[i], err = fsys.Create(fileName(dir, base, suf) + cleanedSuffix); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// removeCleaned removes the .cleaned files of base (an abandoned group).
func (l *Log) removeCleaned(base int64) {
	for _, suf := range append([]string{txnIndexSuffix}, segmentSuffixes...) {
		l.fs.Remove(fileName(l.dir, base, suf) + cleanedSuffix)
	}
}

// swapIn replaces group (consecutive sealed segments) by out, whose
// .cleaned files are complete and synced, following the steps above. It
// returns ErrCleanAborted, removing out's files, when the log changed
// since the pass began (gen is the truncation generation then).
func (l *Log) swapIn(group []sealedSeg, out *segment, gen uint64) error {
	l.checkWriter("swapIn")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	l.mu.RLock()
	i := -1
	for k, s := range l.segs {
		if s == group[0].segment {
			i = k
			break
		}
	}
	ok := i >= 0 && l.truncGen == gen && i+len(group) < len(l.segs)
	for k := 0; ok && k < len(group); k++ {
		ok = l.segs[i+k] == group[k].segment && !group[k].deleted.Load()
	}
	l.mu.RUnlock()
	if !ok {
		return ErrCleanAborted
	}
	end := out.next
	base := out.base
	for _, suf := range segmentSuffixes {
		name := fileName(l.dir, base, suf)
		if err := l.fs.Rename(name+cleanedSuffix, name+swapSuffix); err != nil {
			return l.fail(err)
		}
	}
	if len(out.aborted) > 0 {
		name := fileName(l.dir, base, txnIndexSuffix)
		if err := l.fs.Rename(name+cleanedSuffix, name+swapSuffix); err != nil {
			return l.fail(err)
		}
	}
	manifest := filepath.Join(l.dir, cleanerSwapName)
	if err := vfs.WriteFileAtomic(l.fs, manifest, encodePair(base, end), true); err != nil {
		return l.fail(err)
	}
	if err := l.completeSwap(base, end, group[1:]); err != nil {
		return l.fail(err)
	}
	l.mu.Lock()
	segs := make([]*segment, 0, len(l.segs)-len(group)+1)
	segs = append(segs, l.segs[:i]...)
	segs = append(segs, out)
	segs = append(segs, l.segs[i+len(group):]...)
	l.segs = segs
	l.mu.Unlock()
	// The old segments' names are gone (the first one's now name out);
	// their files close file.delete.delay.ms later, so reads in flight
	// finish.
	for _, s := range group {
		l.closeLater(s.segment)
	}
	l.processDeletes(l.lastNowMs)
	return nil
}

// completeSwap is steps 3 and 4: rename the .swap files of base into place,
// remove the other old segments' names (those given, or at recovery every
// segment with a base in (base, end)), and remove the manifest.
func (l *Log) completeSwap(base, end int64, others []sealedSeg) error {
	for _, suf := range append([]string{txnIndexSuffix}, segmentSuffixes...) {
		name := fileName(l.dir, base, suf)
		ok, err := vfs.Exists(l.fs, name+swapSuffix)
		if err != nil {
			return err
		}
		if ok {
			if err := l.fs.Rename(name+swapSuffix, name); err != nil {
				return err
			}
		}
	}
	if others != nil {
		for _, s := range others {
			l.removeSegmentNames(s.base)
		}
	} else {
		names, err := l.fs.List(l.dir)
		if err != nil {
			return err
		}
		for _, n := range names {
			if off, ok := parseFileName(n, logSuffix); ok && off > base && off < end {
				l.removeSegmentNames(off)
			}
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	if err := l.fs.Remove(filepath.Join(l.dir, cleanerSwapName)); err != nil {
		return err
	}
	return l.fs.SyncDir(l.dir)
}

// finishSwap completes a committed swap and removes the files of an
// uncommitted one (recovery, before the segments are listed).
func (l *Log) finishSwap() error {
	manifest := filepath.Join(l.dir, cleanerSwapName)
	b, err := vfs.ReadFile(l.fs, manifest, 128)
	if err == nil {
		base, end, derr := decodePair(b)
		if derr == nil && end < base {
			derr = errBadCheckpoint
		}
		if derr != nil {
			return fmt.Errorf("storage: %s: %w", manifest, derr)
		}
		if err := l.completeSwap(base, end, nil); err != nil {
			return err
		}
	} else if ok, _ := vfs.Exists(l.fs, manifest); ok {
		return err
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) {
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodePair renders the two-offset files of the cleaner (the manifest:
// base and end; the checkpoint: first dirty offset and tombstone horizon):
// a version line "0", then the two numbers.
func encodePair(a, b int64) []byte {
	return []byte("0\n" + strconv.FormatInt(a, 10) + " " + strconv.FormatInt(b, 10) + "\n")
}

// decodePair parses encodePair's format; both numbers must be >= 0.
func decodePair(data []byte) (a, b int64, err error) {
	var v int
	if _, err := fmt.Sscanf(string(data), "%d\n%d %d\n", &v, &a, &b); err != nil || v != 0 || a < 0 || b < 0 {
		return 0, 0, errBadCheckpoint
	}
	return a, b, nil
}

// writeCleanerCheckpoint records the cleaner checkpoint, the earliest
// delete horizon of a kept tombstone and the lowest tombstone kept for want
// of the tombstone bound in cleaner-offset-checkpoint: a version line "1",
// then the three numbers (version 0 had the first two). It is not synced:
// a lost checkpoint only makes the next pass clean more.
func (l *Log) writeCleanerCheckpoint(firstDirty, horizon, blocked int64) {
	b := []byte("1\n" + strconv.FormatInt(firstDirty, 10) + " " + strconv.FormatInt(horizon, 10) + " " +
		strconv.FormatInt(blocked, 10) + "\n")
	vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, cleanerCheckpointName), b, false)
}

// readCleanerCheckpoint loads the cleaner checkpoint (recovery); a missing
// or malformed file means nothing is known to be clean. A version 0 file
// knows of no blocked tombstone: the first pass after the bound rises finds
// them again.
func (l *Log) readCleanerCheckpoint() {
	b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, cleanerCheckpointName), 128)
	if err != nil {
		return
	}
	if first, horizon, err := decodePair(b); err == nil {
		l.cleanedTo, l.tombstoneHorizon, l.tombstoneBlocked = first, horizon, 0
		return
	}
	var v int
	var first, horizon, blocked int64
	if _, err := fmt.Sscanf(string(b), "%d\n%d %d %d\n", &v, &first, &horizon, &blocked); err == nil && v == 1 &&
		first >= 0 && horizon >= 0 && blocked >= -1 {
		l.cleanedTo, l.tombstoneHorizon, l.tombstoneBlocked = first, horizon, blocked
	}
}
