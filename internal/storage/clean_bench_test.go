package storage

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/vfs"
)

var cleanBenchBytes = flag.Int64("clean.bytes", 64<<20, "log size of BenchmarkCleanThroughput")

// BenchmarkCleanThroughput writes -clean.bytes of 100-byte keyed records
// (10% distinct keys, 100 records a batch) to a log on the OS file system
// and times one cleaning pass over it; it reports the cleaner's MB/s of
// log read and the offset map's memory.
//
//	go test ./internal/storage -run '^$' -bench CleanThroughput -benchtime 1x -clean.bytes 1073741824
func BenchmarkCleanThroughput(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, err := os.MkdirTemp("", "sluice-clean-bench")
		if err != nil {
			b.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.Delete, cfg.Compact = false, true
		cfg.SegmentBytes = 64 << 20
		l, err := Open(vfs.Default, dir+"/t-0", cfg, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		value := make([]byte, 100-16)
		var written int64
		n := 0
		recsPerBatch := 100
		distinct := int(*cleanBenchBytes / 100 / 10)
		for written < *cleanBenchBytes {
			rs := make([]batchtest.Record, recsPerBatch)
			for k := range rs {
				rs[k] = batchtest.Record{Key: []byte(fmt.Sprintf("key-%011d", n%distinct)), Value: value}
				n++
			}
			bt := batchtest.Build(batchtest.Options{Codec: batch.None, BaseTimestamp: 1}, rs)
			if _, err := l.AppendAssigning(bt, 0, time.Now()); err != nil {
				b.Fatal(err)
			}
			written += int64(len(bt))
		}
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
		m := NewOffsetMap(128 << 20)
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		b.StartTimer()
		t0 := time.Now()
		st, err := l.Clean(time.Now(), l.LogEndOffset(), m, nil)
		took := time.Since(t0)
		b.StopTimer()
		runtime.ReadMemStats(&ms1)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(written)/took.Seconds()/1e6, "MB/s")
		b.ReportMetric(float64(m.Bytes())/(1<<20), "map-MiB")
		b.ReportMetric(float64(ms1.HeapInuse)/(1<<20), "heap-MiB")
		b.Logf("log %d MB, %d records, %d distinct keys: pass read %d MB, wrote %d MB, removed %d records, %d keys in map, in %v",
			written>>20, n, distinct, st.BytesRead>>20, st.BytesWritten>>20, st.RecordsRemoved, st.MapKeys, took.Round(time.Millisecond))
		l.Close()
		os.RemoveAll(dir)
	}
}
