package storage

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/vfs"
)

// TestTombstoneBound: a tombstone past its delete horizon stays while it
// is at or above the tombstone bound (a replica may still lack it), the
// log is not due again until the bound moves past it (across a reopen
// too), and then the next pass removes it. The older value it deletes
// goes at once.
func TestTombstoneBound(t *testing.T) {
	fs := vfs.NewMem()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 1000
	l := mustOpen(t, fs, cfg)
	defer func() { l.Close() }()
	tomb := int64(-1)
	for i := 0; i < 200; i++ {
		k, v := fmt.Sprintf("k%d", i%5), fmt.Sprintf("v%d", i)
		switch i {
		case 10:
			k = "gone"
		case 150:
			k, v = "gone", ""
		}
		if recs := appendKeyed(t, l, t0, batch.None, -1, 0, k, v); i == 150 {
			tomb = recs[0].off
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	gone := func() (value, tombstone bool) {
		for _, r := range readRecords(t, l) {
			if r.key == "gone" {
				value, tombstone = value || r.value != nil, tombstone || r.value == nil
			}
		}
		return value, tombstone
	}
	l.SetTombstoneBound(tomb)
	m := NewOffsetMap(1 << 20)
	if _, err := l.Clean(t0, l.LogEndOffset(), m, nil); err != nil { // sets the horizon
		t.Fatal(err)
	}
	later := t0.Add(2 * time.Second)
	if _, err := l.Clean(later, l.LogEndOffset(), m, nil); err != nil {
		t.Fatal(err)
	}
	if v, ts := gone(); v || !ts {
		t.Fatalf("bound at the tombstone: value kept %v, tombstone kept %v; want false, true", v, ts)
	}
	if ci := l.Cleanable(later, l.LogEndOffset()); ci.Due {
		t.Fatalf("due again with the bound unmoved: %+v", ci)
	}
	l.Close()
	l = mustOpen(t, fs, cfg)
	l.SetTombstoneBound(tomb)
	if ci := l.Cleanable(later, l.LogEndOffset()); ci.Due {
		t.Fatalf("due after reopen with the bound unmoved: %+v", ci)
	}
	l.SetTombstoneBound(tomb + 1)
	if ci := l.Cleanable(later, l.LogEndOffset()); !ci.Due {
		t.Fatalf("not due with the bound past the kept tombstone: %+v", ci)
	}
	if _, err := l.Clean(later, l.LogEndOffset(), m, nil); err != nil {
		t.Fatal(err)
	}
	if v, ts := gone(); v || ts {
		t.Fatalf("bound past the tombstone: value kept %v, tombstone kept %v; want neither", v, ts)
	}
	if ci := l.Cleanable(later, l.LogEndOffset()); ci.Due {
		t.Fatalf("still due after the tombstone went: %+v", ci)
	}
}
