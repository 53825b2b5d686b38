package storage

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/sluice-io/sluice/internal/vfs"
)

func benchLog(b *testing.B, fsys vfs.FS) *Log {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	cfg.RetentionBytes = 256 << 20 // bound the disk a long run uses
	l, err := Open(fsys, filepath.Join(b.TempDir(), "bench-0"), cfg, t0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkAppend measures AppendAssigning of ~16 KiB batches on the OS
// filesystem, without fsync (the produce path fsyncs through SyncTo).
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		name           string
		records, value int
	}{{"1KiB-records", 16, 1024}, {"100B-records", 160, 100}} {
		b.Run(c.name, func(b *testing.B) {
			l := benchLog(b, vfs.Default)
			data := mkBatch(plain(c.records, c.value, t0.UnixMilli()))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.AppendAssigning(data, 1, t0); err != nil {
					b.Fatal(err)
				}
				if i%4096 == 4095 {
					l.ApplyRetention(t0, l.LogEndOffset())
				}
			}
		})
	}
}

// BenchmarkSync measures acknowledged appends: many goroutines each append a
// ~16 KiB batch and wait for SyncTo, sharing fsyncs (group commit). It
// reports fsyncs per append.
func BenchmarkSync(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(map[int]string{1: "serial", 16: "parallel-32"}[par], func(b *testing.B) {
			var syncs atomic.Int64
			counter := vfs.InjectorFunc(func(op vfs.Op, name string) error {
				if op == vfs.OpSync && filepath.Ext(name) == ".log" {
					syncs.Add(1)
				}
				return nil
			})
			l := benchLog(b, vfs.WithFaults(vfs.Default, counter))
			proto := mkBatch(plain(16, 1024, t0.UnixMilli()))
			b.SetBytes(int64(len(proto)))
			b.ReportAllocs()
			if par == 1 {
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					info, err := l.AppendAssigning(proto, 1, t0)
					if err == nil {
						err = l.SyncTo(info.LastOffset + 1)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(par)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					data := append([]byte(nil), proto...)
					for pb.Next() {
						info, err := l.AppendAssigning(data, 1, t0)
						if err == nil {
							err = l.SyncTo(info.LastOffset + 1)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64(syncs.Load())/float64(b.N), "fsyncs/op")
		})
	}
}
