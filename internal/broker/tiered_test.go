package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/remote/remotetest"
	"github.com/sluice-io/sluice/internal/vfs"
)

// startRemoteMember is startMember with remote storage over store and
// meta, shared by the cluster.
func startRemoteMember(t *testing.T, q *fakeQuorum, id int32, dir, addr string, store objstore.Store, meta remote.Metadata) *member {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.NodeID = id
	cfg.DataDir = dir
	cfg.Listen = ln.Addr().String()
	cfg.Props["replica.lag.time.max.ms"] = "1000"
	self, _ := broker.SelfBroker(cfg)
	var ctl *fakeNode
	q.mu.Lock()
	for _, n := range q.nodes {
		if n.id == id {
			ctl = n
			n.watchers = nil
		}
	}
	q.mu.Unlock()
	if ctl == nil {
		ctl = q.node(self)
	}
	b, err := broker.Open(broker.Options{Config: cfg, Controller: ctl, CheckWriters: true, RemoteStore: store, RemoteMetadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	reg := protocol.NewRegistry()
	hs := handler.Register(reg, b)
	srv := protocol.NewServer(protocol.Config{}, reg)
	go srv.Serve(ln)
	m := &member{t: t, id: id, dir: dir, addr: ln.Addr().String(), q: q, b: b, h: hs, srv: srv}
	t.Cleanup(m.stop)
	return m
}

// localBytes reads a replica's local log from its local start below end.
func localBytes(t *testing.T, p *broker.Partition, end int64) []byte {
	t.Helper()
	var out []byte
	for off := p.Log().LocalLogStartOffset(); off < end; {
		sl, err := p.Log().Read(off, 1<<20, end)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		data, _ := sl.AppendTo(nil)
		if len(data) == 0 {
			break
		}
		out = append(out, data...)
		off = sl.NextOffset
	}
	return out
}

// TestFollowerRebuildsFromRemote: a follower whose disk was wiped while
// the leader moved its old segments to the remote log does not copy the
// whole log: the leader answers OFFSET_MOVED_TO_TIERED_STORAGE, the
// follower restarts its log at the leader's local log start with the
// remote segment's leader epochs and producer state (KIP-405's follower
// path) and fetches on from there, ending identical to the leader on the
// local range; consumers then read every record through it as leader.
func TestFollowerRebuildsFromRemote(t *testing.T) {
	store, meta := &objstore.Memory{}, &remote.MemMetadata{}
	q := newFakeQuorum()
	dirs := []string{t.TempDir(), t.TempDir()}
	ms := []*member{startRemoteMember(t, q, 1, dirs[0], "", store, meta), startRemoteMember(t, q, 2, dirs[1], "", store, meta)}
	if err := ms[0].b.CreateTopicAssigned("tier", 1, 2, [][]int32{{1, 2}},
		map[string]string{"remote.storage.enable": "true", "segment.bytes": "4000", "index.interval.bytes": "300", "min.insync.replicas": "1"}, false); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(ms)...), kgo.DefaultProduceTopic("tier"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%05d-%s", i, bytes.Repeat([]byte{'x'}, 40)))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 600)
	lp, _ := ms[0].b.Partition("tier", 0)
	waitFor(t, "the follower to catch up", 10*time.Second, func() bool {
		fp, err := ms[1].b.Partition("tier", 0)
		return err == nil && fp.LogEndOffset() == lp.LogEndOffset()
	})

	// The follower goes and loses its disk; the leader tiers.
	ms[1].stop()
	if err := os.RemoveAll(filepath.Join(dirs[1], "tier-0")); err != nil {
		t.Fatal(err)
	}
	below := lp.LogEndOffset() / 2
	if segs, err := remotetest.Upload(ctx, vfs.Default, lp.Log(), store, meta, "", lp.RemotePartition(), below); err != nil || len(segs) == 0 {
		t.Fatalf("upload: %d segments, %v", len(segs), err)
	}
	if _, err := lp.DeleteLocalBelowForTest(below); err != nil {
		t.Fatal(err)
	}
	localStart := lp.Log().LocalLogStartOffset()
	if localStart == 0 {
		t.Fatal("nothing tiered")
	}
	produce(600, 700)

	ms[1] = startRemoteMember(t, q, 2, dirs[1], ms[1].addr, store, meta)
	var fp *broker.Partition
	waitFor(t, "the wiped follower to catch up", 20*time.Second, func() bool {
		var err error
		fp, err = ms[1].b.Partition("tier", 0)
		return err == nil && fp.LogEndOffset() == lp.LogEndOffset()
	})
	fl := fp.Log()
	if fl.LogStartOffset() != 0 || fl.LocalLogStartOffset() != localStart {
		t.Fatalf("follower log start %d, local start %d; want 0 and %d", fl.LogStartOffset(), fl.LocalLogStartOffset(), localStart)
	}
	hw := lp.HighWatermark()
	if got, want := localBytes(t, fp, hw), localBytes(t, lp, hw); !bytes.Equal(got, want) {
		t.Fatalf("the follower's local log (%d bytes) differs from the leader's (%d bytes)", len(got), len(want))
	}
	if got, want := fl.EpochEntries(), lp.Log().EpochEntries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower epochs %v, leader's %v", got, want)
	}
	lprod, fprod := lp.ActiveProducers(), fp.ActiveProducers()
	if len(lprod) == 0 || !reflect.DeepEqual(lprod, fprod) {
		t.Fatalf("follower producers %+v, leader's %+v", fprod, lprod)
	}

	// The follower, leader now, serves the whole log from both tiers.
	waitFor(t, "the follower back in the ISR", 15*time.Second, func() bool {
		return slices.Contains(partitionMeta(q, "tier", 0).ISR, 2)
	})
	ms[0].stop()
	q.fence(1)
	waitFor(t, "the follower to lead", 10*time.Second, func() bool { return fp.IsLeader() })
	cons, err := kgo.NewClient(kgo.SeedBrokers(ms[1].addr), kgo.ConsumeTopics("tier"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := 0
	for next < 700 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 700 from the rebuilt replica", next)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("v%05d-", next); !bytes.HasPrefix(r.Value, []byte(want)) || r.Offset != int64(next) {
				t.Fatalf("record at %d: %q, want %s...", r.Offset, r.Value[:7], want)
			}
			next++
		})
	}
}
