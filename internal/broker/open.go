package broker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

// maxOpenWorkers caps num.recovery.threads.per.data.dir.
const maxOpenWorkers = 64

// openLogs opens the logs of the partitions im assigns to this node that
// have no local replica yet, num.recovery.threads.per.data.dir at a time
// (Kafka's LogManager.loadLogs runs one pool per log dir the same way): a
// restart with 10,000 partitions recovers them in parallel, and creating a
// topic of thousands of partitions overlaps their directory fsyncs.
//
// A log that cannot be opened because the process has no file descriptor
// left is skipped and retried on a later tick (retryOpen): descriptors
// come back as connections close and the file cache shrinks, and a node
// must not halt over that. Any other error takes the data directory
// offline as before (logDirFailed).
func (b *Broker) openLogs(im *metadata.Image) (map[TP]*storage.Log, []error) {
	type job struct {
		tp TP
		t  *metadata.Topic
	}
	var jobs []job
	self := b.cfg.NodeID
	b.mu.RLock()
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		for i := range t.Partitions {
			mp := &t.Partitions[i]
			if tp := (TP{name, mp.Index}); mp.HasReplica(self) && b.parts[tp] == nil {
				jobs = append(jobs, job{tp, t})
			}
		}
	}
	b.mu.RUnlock()
	if len(jobs) == 0 {
		return nil, nil
	}
	t0 := time.Now()
	workers := int(min(max(b.cfg.Int("num.recovery.threads.per.data.dir", 8), 1), maxOpenWorkers))
	logs := make([]*storage.Log, len(jobs))
	errs := make([]error, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) {
					return
				}
				j := jobs[i]
				logs[i], errs[i] = storage.Open(b.fs, partitionDir(b.cfg.DataDir, j.tp), b.storageConfig(j.t), b.now())
			}
		})
	}
	wg.Wait()
	out := make(map[TP]*storage.Log, len(jobs))
	var failed []error
	var deferred int
	var deferredErr error
	for i, j := range jobs {
		switch err := errs[i]; {
		case err == nil:
			out[j.tp] = logs[i]
		case vfs.IsOutOfDescriptors(err):
			deferred++
			deferredErr = err
		default:
			// Kafka's LogManager.getOrCreateLog takes the log dir
			// offline on an IOException; so do we (recovery turns
			// corrupt data into truncation, never into an error).
			b.logDirFailed(&j.tp, "open log", err)
			failed = append(failed, fmt.Errorf("open %s-%d: %w", j.tp.Topic, j.tp.Partition, err))
		}
	}
	if deferred > 0 {
		b.retryOpen.Store(true)
		b.log.Warn("partitions not opened for want of file descriptors; retrying", "n", deferred, "err", deferredErr)
	}
	if len(out) > 0 {
		b.log.Info("partitions opened", "n", len(out), "workers", workers, "took", time.Since(t0).Round(time.Millisecond))
	}
	return out, failed
}
