package broker_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/remote/remotetest"
	"github.com/sluice-io/sluice/internal/vfs"
)

// indexCountingStore counts the Gets of remote index objects.
type indexCountingStore struct {
	objstore.Memory
	indexGets atomic.Int64
}

func (s *indexCountingStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if strings.HasSuffix(key, ".index") || strings.HasSuffix(key, ".timeindex") || strings.HasSuffix(key, ".txnindex") {
		s.indexGets.Add(1)
	}
	return s.Memory.Get(ctx, key, off, n)
}

// consumeFrom reads topic from offset from to n with a consumer.
func consumeFrom(t *testing.T, addr, topic string, from int64, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for got := int(from); got < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d records of %d: %v", got, n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("v%05d", r.Offset); !strings.HasPrefix(string(r.Value), want) {
				t.Fatalf("offset %d: %q", r.Offset, r.Value)
			}
			got++
		})
	}
}

// TestTieredIndexCacheSurvivesRestart: consumers reading a partition's
// remote log from offsets inside its remote segments makes the broker fetch the remote indexes once; after a
// restart of the broker (same data directory) the same reads take them
// from remote-log-index-cache in the data directory, with no Get of an
// index object (Kafka's RemoteIndexCache keeps its files across restarts).
func TestTieredIndexCacheSurvivesRestart(t *testing.T) {
	store, meta := &indexCountingStore{}, &remote.MemMetadata{}
	q := newFakeQuorum()
	dir := t.TempDir()
	m := startRemoteMember(t, q, 1, dir, "", store, meta)
	if err := m.b.CreateTopic("tic", 1, 1, map[string]string{"remote.storage.enable": "true", "segment.bytes": "4000", "index.interval.bytes": "300"}, false); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.addr), kgo.DefaultProduceTopic("tic"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 600
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(fmt.Sprintf("v%05d-%s", i, strings.Repeat("x", 40)))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	p, err := m.b.Partition("tic", 0)
	if err != nil {
		t.Fatal(err)
	}
	below := p.LogEndOffset() * 3 / 4
	if segs, err := remotetest.Upload(context.Background(), vfs.Default, p.Log(), store, meta, "", p.RemotePartition(), below); err != nil || len(segs) < 3 {
		t.Fatalf("upload: %d segments, %v", len(segs), err)
	}
	if _, err := p.DeleteLocalBelowForTest(below); err != nil {
		t.Fatal(err)
	}
	// From offsets inside remote segments: the offset index finds them.
	consumeFrom(t, m.addr, "tic", 5, n)
	consumeFrom(t, m.addr, "tic", 57, n)
	before := store.indexGets.Load()
	if before == 0 {
		t.Fatal("the remote reads took no index object")
	}

	addr := m.addr
	m.stop()
	m = startRemoteMember(t, q, 1, dir, addr, store, meta)
	waitFor(t, "the partition open again", 10*time.Second, func() bool {
		p, err := m.b.Partition("tic", 0)
		return err == nil && p.IsLeader()
	})
	consumeFrom(t, m.addr, "tic", 5, n)
	consumeFrom(t, m.addr, "tic", 57, n)
	if got := store.indexGets.Load() - before; got != 0 {
		t.Fatalf("after the restart %d index objects were read from the store, want 0", got)
	}
	if _, _, reads, _ := m.b.RemoteReader().DiskCacheStats(); reads == 0 {
		t.Fatal("no index read from the disk cache after the restart")
	}
}
