package handler_test

import (
	"context"
	"net"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/vfs"
)

// laggingCtl is a controller whose node applies group configs late, as a
// Raft broker does that has not yet fetched the metadata another node
// just committed: while frozen, its image shows the group configs of the
// moment it froze; SyncMetadata (the read barrier) catches it up.
type laggingCtl struct {
	*metadata.Local
	mu     sync.Mutex
	frozen map[string]map[string]string // nil: not frozen
}

func (c *laggingCtl) Image() *metadata.Image {
	im := c.Local.Image()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen == nil {
		return im
	}
	cp := *im
	cp.GroupConfigs = c.frozen
	return &cp
}

func (c *laggingCtl) freeze() {
	im := c.Local.Image()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = map[string]map[string]string{}
	for g, cs := range im.GroupConfigs {
		c.frozen[g] = cs
	}
}

// SyncMetadata implements metadata.Syncer.
func (c *laggingCtl) SyncMetadata(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = nil
	return nil
}

// TestShareResetReadsConfigAfterBarrier: a share group whose
// share.auto.offset.reset was set to earliest an instant before its first
// fetch, through a node whose metadata has not caught up yet, starts at
// the log start, not at latest (the default), which would skip every
// record already produced and never deliver them.
func TestShareResetReadsConfigAfterBarrier(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.DataDir = dir
	cfg.Listen = ln.Addr().String()
	for k, v := range sharePartProps {
		cfg.Props[k] = v
	}
	self, err := broker.SelfBroker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := metadata.OpenLocal(vfs.Default, path.Join(dir, "__cluster_metadata"), cfg, self, "")
	if err != nil {
		t.Fatal(err)
	}
	ctl := &laggingCtl{Local: l}
	b, err := broker.Open(broker.Options{Config: cfg, Controller: ctl})
	if err != nil {
		t.Fatal(err)
	}
	reg := protocol.NewRegistry()
	hs := handler.Register(reg, b)
	srv := protocol.NewServer(protocol.Config{}, reg)
	go srv.Serve(ln)
	n := &node{t: t, dir: dir, addr: ln.Addr().String(), b: b, h: hs, srv: srv}
	t.Cleanup(n.stop)

	sharePartTopic(t, n, "q", 5)
	ctl.freeze()
	// Set it in the store the frozen image hides (setGroupConfig waits
	// for the broker's image to show it, which a lagging node does not).
	// The broker's group.share.record.lock.duration.ms is 1 s
	// (sharePartProps); the group's, set where the image cannot see it,
	// is 60 s.
	ops := []metadata.ConfigOp{{Name: "share.auto.offset.reset", Value: "earliest"}, {Name: "share.record.lock.duration.ms", Value: "60000"}}
	if err := l.AlterResourceConfigs(ctx(t), metadata.ConfigResource{Type: metadata.ResourceGroup, Name: "sg"}, ops, false, false); err != nil {
		t.Fatal(err)
	}
	if n.b.Image().GroupConfigs["sg"]["share.auto.offset.reset"] == "earliest" {
		t.Fatal("the lagging image shows the new config")
	}
	m := newShareMember(t, n, "sg", "q")
	resp := m.fetch(10)
	if got := len(acquiredOf(t, resp)); got != 5 {
		t.Fatalf("first fetch acquired %d records, want the 5 produced before (share.auto.offset.reset=earliest)", got)
	}
	if resp.AcquisitionLockTimeoutMillis != 60000 {
		t.Fatalf("AcquisitionLockTimeoutMillis %d, want the group's 60000", resp.AcquisitionLockTimeoutMillis)
	}
	// Locked for the group's 60 s, not the broker's 1 s: past 1 s,
	// another member still finds nothing to acquire.
	time.Sleep(1500 * time.Millisecond)
	if got := len(acquiredOf(t, newShareMember(t, n, "sg", "q").fetch(10))); got != 0 {
		t.Fatalf("another member acquired %d records 1.5 s later: the first fetch locked them for the broker's 1 s", got)
	}
}
