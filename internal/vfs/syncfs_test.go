package vfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// TestMemSyncFSDurable: after SyncFS, every write and name change made
// before it survives any crash; what is written after it may not.
func TestMemSyncFSDurable(t *testing.T) {
	for seed := int64(0); seed < 50; seed++ {
		m := NewMem()
		if err := m.MkdirAll("data/a-0", 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := m.Create("data/a-0/x.log")
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("hello"))
		g, _ := m.Create("data/b.tmp")
		g.Write([]byte("b"))
		if err := m.Rename("data/b.tmp", "data/b"); err != nil {
			t.Fatal(err)
		}
		s, err := SyncFSOf(m, "data")
		if err != nil || s == nil {
			t.Fatalf("SyncFSOf(Mem) = %v, %v", s, err)
		}
		if err := s.SyncFS("data"); err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(" world")) // not covered
		c := m.Crash(rand.New(rand.NewSource(seed)))
		b, err := ReadFile(c, "data/a-0/x.log", 100)
		if err != nil || len(b) < 5 || string(b[:5]) != "hello" {
			t.Fatalf("seed %d: x.log after crash = %q, %v", seed, b, err)
		}
		if b, err := ReadFile(c, "data/b", 100); err != nil || string(b) != "b" {
			t.Fatalf("seed %d: renamed file after crash = %q, %v", seed, b, err)
		}
		if ok, _ := Exists(c, "data/b.tmp"); ok {
			t.Fatalf("seed %d: renamed-away name came back", seed)
		}
	}
	// Without the SyncFS some crash loses the write.
	lost := false
	for seed := int64(0); seed < 50 && !lost; seed++ {
		m := NewMem()
		m.MkdirAll("data", 0o755)
		f, _ := m.Create("data/x")
		f.Write([]byte("hello"))
		b, _ := ReadFile(m.Crash(rand.New(rand.NewSource(seed))), "data/x", 100)
		lost = string(b) != "hello"
	}
	if !lost {
		t.Fatal("no crash lost unsynced data: the test shows nothing")
	}
}

// TestFaultsSyncFS: WithFaults injects into SyncFS (OpSyncFS), and
// DiskFaults fails it like Sync.
func TestFaultsSyncFS(t *testing.T) {
	m := NewMem()
	m.MkdirAll("data", 0o755)
	rule := &Rule{Ops: []Op{OpSyncFS}}
	s, err := SyncFSOf(WithFaults(m, rule), "data")
	if err != nil || s == nil {
		t.Fatalf("SyncFSOf(faults) = %v, %v", s, err)
	}
	if err := s.SyncFS("data"); !errors.Is(err, ErrInjected) {
		t.Fatalf("SyncFS = %v, want ErrInjected", err)
	}
	rule.Disable()
	if err := s.SyncFS("data"); err != nil {
		t.Fatal(err)
	}
	d := NewDiskFaults("data")
	s, _ = SyncFSOf(WithHandleCache(WithFaults(m, d), 10), "data")
	d.Set(DiskFail, 0)
	if err := s.SyncFS("data"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("SyncFS in DiskFail = %v, want EIO", err)
	}
	d.Set(DiskOK, 0)
	if err := s.SyncFS("data"); err != nil {
		t.Fatal(err)
	}
	if s, err := SyncFSOf(WithFaults(noSyncFS{m}, rule), "data"); s != nil || err != nil {
		t.Fatalf("SyncFSOf over an FS without it = %v, %v", s, err)
	}
}

type noSyncFS struct{ FS }

func TestOSSyncFS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("syncfs is Linux's")
	}
	dir := t.TempDir()
	s, err := SyncFSOf(Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if s == nil {
		t.Skip("kernel older than 5.8")
	}
	f, err := Default.Create(dir + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("x"))
	if err := s.SyncFS(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncFS(t.TempDir()); !errors.Is(err, ErrNoSyncFS) {
		t.Fatalf("SyncFS of another directory = %v", err)
	}
	if err := s.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncFS(dir); err == nil {
		t.Fatal("SyncFS after Close succeeded")
	}
}

func TestKernelAtLeast(t *testing.T) {
	for _, c := range []struct {
		rel  string
		want bool
	}{{"5.8.0", true}, {"5.7.19-foo", false}, {"6.1.0-13-amd64", true}, {"4.19.0", false}, {"5.15", true}, {"x", false}} {
		if got := kernelAtLeast(c.rel, 5, 8); got != c.want {
			t.Errorf("kernelAtLeast(%q) = %v", c.rel, got)
		}
	}
}

// BenchmarkSyncManyFiles compares, on the OS filesystem of the test's
// temporary directory, making N files each with one fresh 64 KiB append
// durable by N concurrent fsyncs (32 at a time, as the broker's flush
// workers do) against one syncfs: what a flush round of N partitions
// costs either way (docs/performance.md). Other writers on the same
// filesystem add to the syncfs's cost.
//
//	go test ./internal/vfs -run '^$' -bench SyncManyFiles -benchtime 50x
func BenchmarkSyncManyFiles(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("syncfs is Linux's")
	}
	for _, n := range []int{1, 4, 16, 64} {
		dir := b.TempDir()
		s, err := SyncFSOf(Default, dir)
		if err != nil || s == nil {
			b.Skip("no syncfs:", err)
		}
		files := make([]File, n)
		for i := range files {
			f, err := Default.Create(fmt.Sprintf("%s/%d.log", dir, i))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			files[i] = f
		}
		buf := make([]byte, 64<<10)
		write := func() {
			for _, f := range files {
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(fmt.Sprintf("files=%d/fsync", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				write()
				b.StartTimer()
				var wg sync.WaitGroup
				sem := make(chan struct{}, 32)
				for _, f := range files {
					wg.Add(1)
					sem <- struct{}{}
					go func() {
						defer wg.Done()
						if err := f.Sync(); err != nil {
							b.Error(err)
						}
						<-sem
					}()
				}
				wg.Wait()
			}
		})
		b.Run(fmt.Sprintf("files=%d/syncfs", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				write()
				b.StartTimer()
				if err := s.SyncFS(dir); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
