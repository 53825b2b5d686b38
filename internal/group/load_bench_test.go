package group

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

var loadCommits = flag.Int("load.commits", 20000, "commits in BenchmarkLoadCompacted's group")

// BenchmarkLoadCompacted measures the coordinator's load (loadLog, what a
// new offsets-partition leader runs) of one group whose consumer committed
// -load.commits offsets over 100 partitions (100 commits a batch, as one
// OffsetCommit request), on the uncompacted log and after the log cleaner
// compacted it; every loaded offset is checked against the last commit.
//
//	go test ./internal/group -run '^$' -bench LoadCompacted -benchtime 1x -load.commits 1000000
func BenchmarkLoadCompacted(b *testing.B) {
	dir := b.TempDir()
	cfg := storage.DefaultConfig()
	cfg.Delete, cfg.Compact = false, true
	cfg.SegmentBytes = 64 << 20
	log, err := storage.Open(vfs.Default, filepath.Join(dir, OffsetsTopic+"-0"), cfg, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	const parts = 100
	t0 := time.UnixMilli(1_700_000_000_000)
	for i := 0; i < *loadCommits/parts; i++ {
		recs := make([]record, parts)
		for p := range recs {
			recs[p] = offsetRecord("billing", TopicPartition{"orders", int32(p)}, Offset{Offset: int64(i), LeaderEpoch: 1, CommitTime: t0})
		}
		if _, err := log.AppendAssigning(encodeBatch(recs, t0), 0, t0); err != nil {
			b.Fatal(err)
		}
	}
	// Roll past the commits so the cleaner may clean them all.
	if _, err := log.AppendAssigning(encodeBatch([]record{offsetRecord("other", TopicPartition{"t", 0}, Offset{CommitTime: t0})}, t0.Add(8*24*time.Hour)), 0, t0.Add(8*24*time.Hour)); err != nil {
		b.Fatal(err)
	}
	if err := log.Sync(); err != nil {
		b.Fatal(err)
	}
	check := func(l *loaded) {
		if len(l.offsets["billing"]) != parts {
			b.Fatalf("loaded %d offsets", len(l.offsets["billing"]))
		}
		for tp, o := range l.offsets["billing"] {
			if o.Offset != int64(*loadCommits/parts-1) {
				b.Fatalf("%v at %d", tp, o.Offset)
			}
		}
	}
	load := func(name string) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				l := loadLog(log, log.LogStartOffset(), log.LogEndOffset(), func(msg string, off int64, err error) { b.Fatal(msg, off, err) })
				check(l)
			}
			b.ReportMetric(float64(log.Size())/(1<<20), "log-MiB")
		})
	}
	load("uncompacted")
	if _, err := log.Clean(t0.Add(8*24*time.Hour), log.LogEndOffset(), storage.NewOffsetMap(16<<20), nil); err != nil {
		b.Fatal(err)
	}
	load("compacted")
	os.RemoveAll(dir)
}
