package broker

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/vfs"
)

// The high-watermark checkpoint (Kafka's replication-offset-checkpoint):
// a version line (0), a count line, then "topic partition hw" per line. It
// is written every 5 s and on close, and read once at startup as each
// replica's initial HW (clamped to its log by the replica machine). A stale
// or missing checkpoint is safe: the HW only starts lower and catches up.

const hwCheckpointFile = "replication-offset-checkpoint"

// maxCheckpointBytes bounds the checkpoint read at startup.
const maxCheckpointBytes = 64 << 20

func (b *Broker) readHWCheckpoint() map[TP]int64 {
	out := map[TP]int64{}
	data, err := vfs.ReadFile(b.fs, path.Join(b.cfg.DataDir, hwCheckpointFile), maxCheckpointBytes)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		if line <= 2 {
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			return map[TP]int64{}
		}
		part, err1 := strconv.ParseInt(f[1], 10, 32)
		hw, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || hw < 0 {
			return map[TP]int64{}
		}
		out[TP{f[0], int32(part)}] = hw
	}
	return out
}

// checkpointedHW returns the HW read at startup for tp (0 if none).
func (b *Broker) checkpointedHW(tp TP) int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.hwCheck[tp]
}

func (b *Broker) writeHWCheckpoint() {
	if b.dirFailed.Load() {
		return
	}
	parts := b.Partitions()
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].Topic != parts[j].Topic {
			return parts[i].Topic < parts[j].Topic
		}
		return parts[i].Partition < parts[j].Partition
	})
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "0\n%d\n", len(parts))
	for _, p := range parts {
		fmt.Fprintf(&buf, "%s %d %d\n", p.Topic, p.Partition, p.HighWatermark())
	}
	if bytes.Equal(buf.Bytes(), b.lastHWCheck) {
		return // unchanged: no rewrite (10,000 idle partitions cost no fsync)
	}
	if err := vfs.WriteFileAtomic(b.fs, path.Join(b.cfg.DataDir, hwCheckpointFile), buf.Bytes(), true); err != nil {
		// Kafka: an IOException writing a checkpoint file takes its log
		// dir offline (CheckpointFile.write -> LogDirFailureChannel).
		b.logDirFailed(nil, "write "+hwCheckpointFile, err)
		return
	}
	b.lastHWCheck = buf.Bytes()
}
