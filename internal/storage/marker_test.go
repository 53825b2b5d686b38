package storage

import (
	"math/rand"
	"testing"

	"github.com/sluice-io/sluice/internal/vfs"
)

// Opening a cleanly closed log removes the clean-shutdown marker without an
// fsync; the first change to the log makes that removal durable first, so
// no crash after a change can leave the marker vouching for files that
// changed under it.
func TestCleanMarkerRemovalDurableBeforeFirstChange(t *testing.T) {
	for seed := range int64(50) {
		mem := vfs.NewMem()
		cfg := testConfig()
		l := mustOpen(t, mem, cfg)
		for range 5 {
			if _, err := l.AppendAssigning(mkBatch(plain(3, 20, t0.UnixMilli())), 1, t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		marker := "/data/topic-0/" + cleanShutdownName
		l2 := mustOpen(t, mem, cfg)
		if ok, _ := vfs.Exists(mem, marker); ok {
			t.Fatal("marker still there after a clean open")
		}
		if _, err := l2.AppendAssigning(mkBatch(plain(3, 20, t0.UnixMilli())), 1, t0); err != nil {
			t.Fatal(err)
		}
		crashed := mem.Crash(rand.New(rand.NewSource(seed)))
		if ok, _ := vfs.Exists(crashed, marker); ok {
			t.Fatalf("seed %d: the clean-shutdown marker survived a crash after an append", seed)
		}
		l2.Close()
	}
}
