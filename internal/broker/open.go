package broker

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
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
	t0 := b.now()
	dirs := make([]string, len(jobs))
	for i, j := range jobs {
		dirs[i] = partitionDir(b.cfg.DataDir, j.tp)
	}
	if err := b.makePartitionDirs(dirs); err != nil {
		b.logDirFailed(nil, "create partition directories", err)
		return nil, []error{err}
	}
	logs := make([]*storage.Log, len(jobs))
	errs := make([]error, len(jobs))
	b.parallel(len(jobs), func(i int) {
		j := jobs[i]
		write, err := b.checkTopicID(dirs[i], j.t.ID)
		if err != nil {
			errs[i] = err
			return
		}
		logs[i], errs[i] = storage.Open(b.fs, dirs[i], b.storageConfig(j.t), b.now())
		if errs[i] == nil && write {
			if err := b.writeTopicID(dirs[i], j.t.ID); err != nil {
				logs[i].Close()
				logs[i], errs[i] = nil, err
			}
		}
	})
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
		b.log.Info("partitions opened", "n", len(out), "workers", b.workers(), "took", clock.Since(b.clock, t0).Round(time.Millisecond))
	}
	return out, failed
}

// makePartitionDirs creates the missing directories among dirs and makes
// their names durable with one fsync of the data directory, instead of
// one per partition (storage.Open then finds them in place).
func (b *Broker) makePartitionDirs(dirs []string) error {
	created := false
	for _, d := range dirs {
		ok, err := vfs.Exists(b.fs, d)
		if err != nil {
			return err
		}
		if !ok {
			if err := b.fs.MkdirAll(d, 0o755); err != nil {
				return err
			}
			created = true
		}
	}
	if !created {
		return nil
	}
	return b.fs.SyncDir(b.cfg.DataDir)
}

// workers is num.recovery.threads.per.data.dir, bounded.
func (b *Broker) workers() int {
	return int(min(max(b.cfg.Int("num.recovery.threads.per.data.dir", 8), 1), maxOpenWorkers))
}

// parallel calls fn(0..n-1) on b.workers() goroutines and waits.
func (b *Broker) parallel(n int, fn func(i int)) {
	if n == 1 || b.steps {
		// Step mode: in order, on the caller's goroutine.
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(b.workers(), n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// brokersEqual reports whether two images register the same brokers in
// the same states.
func brokersEqual(a, b *metadata.Image) bool {
	return maps.EqualFunc(a.Brokers, b.Brokers, metadata.Broker.Equal)
}

// samePartition reports whether a partition's metadata is unchanged.
func samePartition(a, b *metadata.Partition) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		a.Recovering == b.Recovering && slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR)
}
