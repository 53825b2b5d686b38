package broker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
)

// gatedStore is an objstore.Memory whose Puts of log objects wait until
// the gate is opened, then take delay each, counting how many run at
// once.
type gatedStore struct {
	objstore.Memory
	gate  chan struct{}
	delay time.Duration
	// running is the number of log Puts under way, most the largest seen.
	running, most atomic.Int64
	once          sync.Once
}

func (g *gatedStore) open() { g.once.Do(func() { close(g.gate) }) }

func (g *gatedStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if strings.HasSuffix(key, ".log") {
		n := g.running.Add(1)
		defer g.running.Add(-1)
		for {
			m := g.most.Load()
			if n <= m || g.most.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		time.Sleep(g.delay)
	}
	return g.Memory.Put(ctx, key, body, size)
}

// TestTieredCopiesOverlap: with many segments waiting to be copied, the
// leader copies several of one partition at once (up to the copier
// pool), so that copies keep up with the producer and the local disk
// stays near local.retention.bytes; the remote log they make has no gap,
// and the local log is back within its bound once they finished.
func TestTieredCopiesOverlap(t *testing.T) {
	store := &gatedStore{gate: make(chan struct{}), delay: 30 * time.Millisecond}
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), store, tieredProps())
	defer store.open()
	const segBytes, localBytes = 2048, 4096
	if err := m.b.CreateTopic("overlap", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false); err != nil {
		t.Fatal(err)
	}
	// The first copy waits at the gate while about 15 segments roll.
	produceN(t, []string{m.addr}, "overlap", 300, 100)
	store.open()
	p, err := m.b.Partition("overlap", 0)
	if err != nil {
		t.Fatal(err)
	}
	rp := remoteOf(t, m.b, "overlap", 0)
	waitFor(t, "the rolled segments copied and deleted locally", 20*time.Second, func() bool {
		return len(m.b.RemoteMetadata().Segments(rp)) >= 10 && p.Log().Size() <= localBytes+2*segBytes
	})
	if most := store.most.Load(); most < 2 {
		t.Fatalf("at most %d copy of the partition at once with %d segments waiting", most, len(m.b.RemoteMetadata().Segments(rp)))
	}
	checkRemoteLog(t, store, m.b.RemoteMetadata().Segments(rp), 0)
}

// readOffsets reads the partition with a consumer from the earliest
// offset until it has n records (failing after 20 s) and returns their
// offsets.
func readOffsets(t *testing.T, addr, topic string, n int) []int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []int64
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %d: %v", len(out), n, ctx.Err())
		}
		for _, fe := range fs.Errors() {
			t.Logf("fetch error (retried): %v", fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r.Offset) })
	}
	return out
}

// TestTieredCopyDisable: remote.log.copy.disable (KIP-950) stops the
// copies of a tiered topic while its remote log stays readable; the local
// log then follows retention.* instead of local.retention.* (Kafka's
// UnifiedLog.localRetentionSize with remoteLogEnabledAndRemoteCopyEnabled
// false): unlimited, nothing is deleted locally; bounded, the local
// segments go whether copied or not, the remote segments expire by
// retention.bytes over the whole log, and the log start follows to the
// local log start once no remote segment is left.
func TestTieredCopyDisable(t *testing.T) {
	store := &faultyStore{}
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), store, tieredProps())
	const segBytes, localBytes = 2048, 4096
	if err := m.b.CreateTopic("nocopy", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, []string{m.addr}, "nocopy", 300, 100)
	p, err := m.b.Partition("nocopy", 0)
	if err != nil {
		t.Fatal(err)
	}
	rp := remoteOf(t, m.b, "nocopy", 0)
	waitFor(t, "copies", 20*time.Second, func() bool {
		return len(m.b.RemoteMetadata().Segments(rp)) >= 10 && p.Log().Size() <= localBytes+segBytes
	})
	if err := m.b.AlterTopicConfigs("nocopy", []metadata.ConfigOp{{Name: "remote.log.copy.disable", Value: "true"}}, false, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a copy under way ends
	segs := m.b.RemoteMetadata().Segments(rp)
	hi := segs[len(segs)-1].EndOffset
	localStart := p.Log().LocalLogStartOffset()
	produceN(t, []string{m.addr}, "nocopy", 300, 100)
	time.Sleep(500 * time.Millisecond) // many manager and retention passes
	if segs := m.b.RemoteMetadata().Segments(rp); segs[len(segs)-1].EndOffset != hi {
		t.Fatalf("copied up to %d with remote.log.copy.disable; %d before", segs[len(segs)-1].EndOffset, hi)
	}
	// retention.bytes is unlimited: the local log keeps what is not copied.
	if got := p.Log().LocalLogStartOffset(); got != localStart || p.Log().Size() < 20*1024 {
		t.Fatalf("local start %d (was %d), %d bytes local: local.retention.bytes applied with copies disabled", got, localStart, p.Log().Size())
	}
	// The remote log is still read.
	if offs := readOffsets(t, m.addr, "nocopy", 600); offs[0] != 0 || offs[599] != 599 {
		t.Fatalf("read offsets %d..%d, want 0..599", offs[0], offs[len(offs)-1])
	}
	// retention.bytes bounds the local log, copied or not, and the whole
	// log: the remote segments expire, the log start follows.
	if err := m.b.AlterTopicConfigs("nocopy", []metadata.ConfigOp{{Name: "retention.bytes", Value: "16384"}}, false, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "retention.bytes over the local log and the whole log", 20*time.Second, func() bool {
		return p.Log().Size() <= 16384+segBytes && p.Log().LocalLogStartOffset() > hi+1 &&
			len(m.b.RemoteMetadata().Segments(rp)) == 0 && p.LogStartOffset() == p.Log().LocalLogStartOffset()
	})
	keys, _ := store.List(context.Background(), remote.PartitionPrefix("", rp))
	if len(keys) != 0 {
		t.Fatalf("%d objects left after the remote log expired", len(keys))
	}
	start := p.LogStartOffset()
	if offs := readOffsets(t, m.addr, "nocopy", int(600-start)); offs[0] != start {
		t.Fatalf("read from %d, log start %d", offs[0], start)
	}
}

// publishRemote writes remote log metadata records (remote.Encode*) for
// rp to its __remote_log_metadata partition, as another broker would.
func publishRemote(t *testing.T, addr string, rp remote.Partition, values ...[]byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mp := remote.MetadataPartition(rp, 3) // tieredProps' num.partitions
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: remote.MetadataTopic, Partition: mp, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTieredRetentionLineage: remote retention counts only the segments
// on the leader's epoch lineage (Kafka's
// RemoteLogManager.isRemoteSegmentWithinLeaderEpochs): a finished segment
// a deposed leader uploaded of its epoch past the offset where the next
// epoch started (its log diverged there) is not counted against
// retention.bytes — no segment of the lineage expires for it, the log
// start stays — and it is deleted, objects and metadata.
func TestTieredRetentionLineage(t *testing.T) {
	store := &faultyStore{}
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), store, tieredProps())
	if err := m.b.CreateTopic("lineage", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096", "retention.bytes": "1048576",
	}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, []string{m.addr}, "lineage", 200, 100)
	p, err := m.b.Partition("lineage", 0)
	if err != nil {
		t.Fatal(err)
	}
	rp := remoteOf(t, m.b, "lineage", 0)
	// A new leader epoch from offset x: the old epoch ends at x-1.
	old := p.LeaderEpoch()
	x := p.LogEndOffset()
	q.update(func(im *metadata.Image) error {
		pm := &im.Topics["lineage"].Partitions[0]
		pm.LeaderEpoch++
		pm.PartitionEpoch++
		return nil
	})
	waitFor(t, "the new leader epoch", 5*time.Second, func() bool { return p.LeaderEpoch() == old+1 })
	produceN(t, []string{m.addr}, "lineage", 200, 100)
	waitFor(t, "copies past the new epoch's start", 20*time.Second, func() bool {
		segs := m.b.RemoteMetadata().Segments(rp)
		return len(segs) > 0 && segs[len(segs)-1].EndOffset > x+20
	})
	lineage := m.b.RemoteMetadata().Segments(rp)
	// A deposed leader of the old epoch copied [x-10, x+50] of its own
	// log, which went on in the old epoch: 1 GiB, far above
	// retention.bytes.
	fake := remote.Segment{Partition: rp, StartOffset: x - 10, EndOffset: x + 50, MaxTimestamp: time.Now().UnixMilli(),
		BrokerID: 2, EventTimestamp: time.Now().UnixMilli(), LeaderEpochs: []epoch.Entry{{Epoch: old, StartOffset: x - 10}},
		SizeBytes: 1 << 30, TxnIndexEmpty: true, State: remote.CopyStarted}
	fake.ID[0] = 0xfe
	if err := store.Memory.Put(context.Background(), remote.ObjectKey("", &fake, remote.FileLog), strings.NewReader("diverged"), 8); err != nil {
		t.Fatal(err)
	}
	publishRemote(t, m.addr, rp, remote.EncodeSegment(&fake),
		remote.EncodeUpdate(&remote.Update{Partition: rp, ID: fake.ID, BrokerID: 2, EventTimestamp: time.Now().UnixMilli(), State: remote.CopyFinished}))
	waitFor(t, "the diverged segment deleted", 10*time.Second, func() bool {
		for _, s := range m.b.RemoteMetadata().(*remote.Cache).All(rp) {
			if s.ID == fake.ID {
				return false
			}
		}
		_, err := store.Get(context.Background(), remote.ObjectKey("", &fake, remote.FileLog), 0, -1)
		return errors.Is(err, objstore.ErrNotFound)
	})
	time.Sleep(200 * time.Millisecond) // more passes
	if ls := p.LogStartOffset(); ls != 0 {
		t.Fatalf("log start %d: the lineage's segments expired for a diverged one", ls)
	}
	left := map[[16]byte]bool{}
	for _, s := range m.b.RemoteMetadata().Segments(rp) {
		left[s.ID] = true
	}
	for _, s := range lineage {
		if !left[s.ID] {
			t.Fatalf("segment %d-%d of the lineage expired", s.StartOffset, s.EndOffset)
		}
	}
}

// TestTieredTopicDeletedWhileLeaderDown: a tiered topic with one replica
// is deleted while that replica's broker is down, so no leader deletes
// its remote log then; when the broker comes back, it finds the
// partition's directory of a topic id the metadata no longer has, sets it
// aside and deletes the remote log (Kafka's RemoteLogManager.stopPartitions
// with deleteRemoteLog, DELETE_PARTITION_*): every object goes, and the
// metadata forgets the partition.
func TestTieredTopicDeletedWhileLeaderDown(t *testing.T) {
	store := &faultyStore{}
	q := newFakeQuorum()
	props := tieredProps()
	ms := []*member{startTiered(t, q, 1, t.TempDir(), store, props), startTiered(t, q, 2, t.TempDir(), store, props)}
	if err := ms[0].b.CreateTopic("away", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false); err != nil {
		t.Fatal(err)
	}
	leader := ms[partitionMeta(q, "away", 0).Leader-1]
	other := ms[2-leader.id]
	produceN(t, seeds(ms), "away", 200, 100)
	rp := remoteOf(t, leader.b, "away", 0)
	waitFor(t, "copies", 20*time.Second, func() bool { return len(leader.b.RemoteMetadata().Segments(rp)) >= 3 })
	leader.stop()
	q.fence(leader.id)
	if err := other.b.DeleteTopic("away"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if keys, _ := store.List(context.Background(), remote.PartitionPrefix("", rp)); len(keys) == 0 {
		t.Fatal("the remote log went with its only replica's broker down")
	}
	back := startTiered(t, q, leader.id, leader.dir, store, props)
	q.unfence(leader.id)
	waitFor(t, "the remote log deleted by the broker back", 20*time.Second, func() bool {
		keys, err := store.List(context.Background(), remote.PartitionPrefix("", rp))
		return err == nil && len(keys) == 0 && len(back.b.RemoteMetadata().(*remote.Cache).All(rp)) == 0
	})
}

// listOffsetAt sends one ListOffsets v9 for partition 0 of topic at
// timestamp ts (-3 max timestamp) and returns the offset and timestamp.
func listOffsetAt(t *testing.T, addr, topic string, ts int64) (offset, timestamp int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(9)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("ListOffsets %d: %v", ts, err)
	}
	return p.Offset, p.Timestamp
}

// TestTieredListOffsetsMaxTimestamp: ListOffsets -3 (MAX_TIMESTAMP, v7)
// on a tiered partition whose largest timestamp is only in the remote
// log answers the largest timestamp of the local log, as Kafka does
// (UnifiedLog.fetchOffsetByTimestamp looks at logSegments, the local
// segments, for MAX_TIMESTAMP, and asks the remote log only for a
// timestamp lookup); a lookup of that timestamp finds its offset in the
// remote log (RemoteLogManager.findOffsetByTimestamp).
func TestTieredListOffsetsMaxTimestamp(t *testing.T) {
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), &faultyStore{}, tieredProps())
	if err := m.b.CreateTopic("maxts", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.addr), kgo.DefaultProduceTopic("maxts"), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	base := time.Now().Add(-time.Hour).UnixMilli()
	const n, peak = 300, 5
	peakTs := base + 30*60*1000 // newer than every other record
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i += 10 {
		var recs []*kgo.Record
		for j := i; j < i+10; j++ {
			ts := base + int64(j)
			if j == peak {
				ts = peakTs
			}
			val := make([]byte, 100)
			rand.Read(val) // incompressible
			recs = append(recs, &kgo.Record{Value: val, Timestamp: time.UnixMilli(ts)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p, err := m.b.Partition("maxts", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the record with the largest timestamp only in the remote log", 20*time.Second, func() bool {
		return p.Log().LocalLogStartOffset() > peak+50
	})
	if off, ts := listOffsetAt(t, m.addr, "maxts", -3); off != n-1 || ts != base+n-1 {
		t.Fatalf("max timestamp: offset %d timestamp %d, want %d at %d (the local log's largest)", off, ts, n-1, base+n-1)
	}
	if off, ts := listOffsetAt(t, m.addr, "maxts", peakTs); off != peak || ts != peakTs {
		t.Fatalf("timestamp %d: offset %d timestamp %d, want offset %d (remote)", peakTs, off, ts, peak)
	}
}
