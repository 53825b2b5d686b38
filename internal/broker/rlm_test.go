package broker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/remote"
)

// faultyStore is an objstore.Memory whose Puts fail while failing is
// set, counting every Put of a segment's log object by key.
type faultyStore struct {
	objstore.Memory
	failing atomic.Bool
	// failIndex fails only the Puts of .index objects: a copy dies
	// half way, its .log object written.
	failIndex atomic.Bool
	// refused counts the Puts failed.
	refused atomic.Int64
	mu      sync.Mutex
	logPuts map[string]int
	// refusedKeys holds the keys of the Puts failed.
	refusedKeys map[string]bool
}

var errStoreDown = errors.New("test: object store unreachable")

func (f *faultyStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if f.failing.Load() || f.failIndex.Load() && strings.HasSuffix(key, ".index") {
		f.refused.Add(1)
		f.mu.Lock()
		if f.refusedKeys == nil {
			f.refusedKeys = map[string]bool{}
		}
		f.refusedKeys[key] = true
		f.mu.Unlock()
		return errStoreDown
	}
	if strings.HasSuffix(key, ".log") {
		f.mu.Lock()
		if f.logPuts == nil {
			f.logPuts = map[string]int{}
		}
		f.logPuts[key]++
		f.mu.Unlock()
	}
	return f.Memory.Put(ctx, key, body, size)
}

// wasRefused reports whether a Put of key failed.
func (f *faultyStore) wasRefused(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refusedKeys[key]
}

// logPutsByStart counts the uploads of log objects per segment start
// offset (the key's 20-digit prefix in the partition's directory).
func (f *faultyStore) logPutsByStart() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, n := range f.logPuts {
		name := k[strings.LastIndex(k, "/")+1:]
		out[name[:20]] += n
	}
	return out
}

// tieredProps are the broker settings of the tiered-storage tests: fast
// manager and retention passes, a small metadata topic.
func tieredProps() map[string]string {
	return map[string]string{
		"remote.log.manager.task.interval.ms":                      "30",
		"remote.log.manager.task.retry.backoff.ms":                 "20",
		"remote.log.manager.task.retry.backoff.max.ms":             "100",
		"log.retention.check.interval.ms":                          "30",
		"rlmm.config.remote.log.metadata.topic.num.partitions":     "3",
		"rlmm.config.remote.log.metadata.topic.replication.factor": "3",
	}
}

// startTiered starts an in-process member with an object store.
func startTiered(t *testing.T, q *fakeQuorum, id int32, dir string, store objstore.Store, props map[string]string, with ...func(*broker.Options)) *member {
	t.Helper()
	m := startTieredTB(t, q, id, dir, store, props, with...)
	m.t = t
	return m
}

// startTieredB starts a one-broker cluster with an in-memory object
// store for a benchmark.
func startTieredB(b *testing.B, q *fakeQuorum, dir string, props map[string]string) *member {
	return startTieredTB(b, q, 1, dir, &objstore.Memory{}, props)
}

func startTieredTB(t testing.TB, q *fakeQuorum, id int32, dir string, store objstore.Store, props map[string]string, with ...func(*broker.Options)) *member {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.NodeID = id
	cfg.DataDir = dir
	cfg.Listen = ln.Addr().String()
	cfg.Props["replica.lag.time.max.ms"] = "1000"
	for k, v := range props {
		cfg.Props[k] = v
	}
	self, _ := broker.SelfBroker(cfg)
	ctl := q.node(self)
	opts := broker.Options{Config: cfg, Controller: ctl, CheckWriters: true, RemoteStore: store}
	for _, fn := range with {
		fn(&opts)
	}
	b, err := broker.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := protocol.NewRegistry()
	hs := handler.Register(reg, b)
	srv := protocol.NewServer(protocol.Config{}, reg)
	go srv.Serve(ln)
	m := &member{id: id, dir: dir, addr: ln.Addr().String(), q: q, b: b, h: hs, srv: srv}
	t.Cleanup(func() {
		if m.t != nil {
			m.stop() // with the one-writer check
			return
		}
		if m.srv != nil {
			m.srv.Close()
			m.h.Close()
			m.b.Close()
			m.srv = nil
		}
	})
	return m
}

// produceN produces n records of size bytes with acks=all.
func produceN(t *testing.T, addrs []string, topic string, n, size int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i += 10 {
		var recs []*kgo.Record
		for j := i; j < min(i+10, n); j++ {
			val := make([]byte, size)
			rand.Read(val) // incompressible
			recs = append(recs, &kgo.Record{Value: val})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

func remoteOf(t *testing.T, b *broker.Broker, topic string, p int32) remote.Partition {
	id, ok := b.TopicID(topic)
	if !ok {
		t.Fatalf("no topic id for %s", topic)
	}
	return remote.Partition{TopicID: id, Topic: topic, Partition: p}
}

// checkRemoteLog checks that the finished segments cover [from, to)
// without a gap, each log object holding exactly its range's batches.
func checkRemoteLog(t *testing.T, store objstore.Store, segs []remote.Segment, from int64) int64 {
	t.Helper()
	next := from
	for _, s := range segs {
		if s.StartOffset > next {
			t.Fatalf("gap in the remote log: next %d, segment %d-%d", next, s.StartOffset, s.EndOffset)
		}
		rc, err := store.Get(context.Background(), remote.ObjectKey("", &s, remote.FileLog), 0, -1)
		if err != nil {
			t.Fatalf("segment %d: %v", s.StartOffset, err)
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		if int64(len(data)) != s.SizeBytes {
			t.Fatalf("segment %d: %d bytes, metadata says %d", s.StartOffset, len(data), s.SizeBytes)
		}
		first, last := int64(-1), int64(-1)
		for len(data) > 0 {
			h, _, rest, err := batch.Next(data)
			if err != nil {
				t.Fatalf("segment %d: %v", s.StartOffset, err)
			}
			if first < 0 {
				first = h.BaseOffset
			}
			last, data = h.LastOffset(), rest
		}
		if first != s.StartOffset || last != s.EndOffset {
			t.Fatalf("segment %d-%d holds %d-%d", s.StartOffset, s.EndOffset, first, last)
		}
		for _, k := range []remote.FileKind{remote.FileOffsetIndex, remote.FileTimeIndex, remote.FileProducerSnapshot, remote.FileLeaderEpochs} {
			if _, err := store.Get(context.Background(), remote.ObjectKey("", &s, k), 0, -1); err != nil {
				t.Fatalf("segment %d %s: %v", s.StartOffset, k.Suffix(), err)
			}
		}
		next = max(next, s.EndOffset+1)
	}
	return next
}

// TestTieredSingleNode: a topic with remote storage and a small
// local.retention.bytes: the leader copies every rolled segment (objects
// present, metadata FINISHED), the local log stays bounded, the log start
// stays at 0 until retention.bytes over the whole log expires remote
// segments, which then raises it and deletes their objects.
func TestTieredSingleNode(t *testing.T) {
	store := &faultyStore{}
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), store, tieredProps())
	const segBytes, localBytes = 2048, 4096
	err := m.b.CreateTopic("tiered", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	produceN(t, []string{m.addr}, "tiered", 400, 100)
	p, err := m.b.Partition("tiered", 0)
	if err != nil {
		t.Fatal(err)
	}
	rp := remoteOf(t, m.b, "tiered", 0)
	waitFor(t, "the rolled segments copied and deleted locally", 20*time.Second, func() bool {
		return len(m.b.RemoteMetadata().Segments(rp)) > 0 && p.Log().Size() <= localBytes+segBytes
	})
	segs := m.b.RemoteMetadata().Segments(rp)
	if end := checkRemoteLog(t, store, segs, 0); end < p.Log().LocalLogStartOffset() {
		t.Fatalf("remote log ends at %d, below the local start %d", end, p.Log().LocalLogStartOffset())
	}
	if ls := p.LogStartOffset(); ls != 0 {
		t.Fatalf("log start %d before any retention.*", ls)
	}
	if n := len(m.b.RemoteMetadata().Segments(rp)); n < 10 {
		t.Fatalf("%d remote segments", n)
	}
	// retention.bytes over the whole log: remote segments expire, the
	// log start rises, their objects go.
	if err := m.b.AlterTopicConfigs("tiered", []metadata.ConfigOp{{Name: "retention.bytes", Value: "8192"}}, false, false); err != nil {
		t.Fatal(err)
	}
	// The log start is raised first, then the segments below it go.
	var left []remote.Segment
	waitFor(t, "remote retention", 20*time.Second, func() bool {
		left = m.b.RemoteMetadata().Segments(rp)
		ls := p.LogStartOffset()
		return ls > 0 && len(left) < len(segs) && (len(left) == 0 && ls == p.Log().LocalLogStartOffset() || len(left) > 0 && left[0].StartOffset == ls)
	})
	if size := int64(0); true {
		for _, s := range left {
			size += s.SizeBytes
		}
		// A segment goes only if the log stays at least retention.bytes
		// without it (Kafka's RLMExpirationTask): the log may exceed it
		// by less than a segment.
		if size > 8192+segBytes {
			t.Fatalf("%d bytes remote after retention.bytes 8192", size)
		}
	}
	keys, _ := store.List(context.Background(), remote.PartitionPrefix("", rp))
	live := map[string]bool{}
	for _, s := range left {
		live[remote.ObjectKey("", &s, remote.FileLog)] = true
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ".log") && !live[k] {
			t.Fatalf("object %s of an expired segment is still there", k)
		}
	}
}

// TestTieredStoreDown: while the object store fails, no local segment is
// deleted (local.retention.bytes is exceeded, not enforced), the copy lag
// is reported, and the half-done copies are not readable; once it is back
// the copies are retried, the dangling ones cleaned up (their objects
// deleted), and the local log bounded again.
func TestTieredStoreDown(t *testing.T) {
	store := &faultyStore{}
	store.failing.Store(true)
	q := newFakeQuorum()
	props := tieredProps()
	props["remote.log.manager.task.retry.backoff.max.ms"] = "400"
	m := startTiered(t, q, 1, t.TempDir(), store, props)
	if err := m.b.CreateTopic("down", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "2048", "retention.ms": "1000",
	}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, []string{m.addr}, "down", 300, 100)
	p, err := m.b.Partition("down", 0)
	if err != nil {
		t.Fatal(err)
	}
	rp := remoteOf(t, m.b, "down", 0)
	n := len(p.Log().LocalSegments())
	// Many manager and retention passes, retention.ms long past.
	refused := store.refused.Load()
	time.Sleep(1500 * time.Millisecond)
	// A pass every 30 ms, but the retries back off (20 ms doubling to
	// 400 ms): a handful of attempts, not fifty.
	if tries := store.refused.Load() - refused; tries > 12 {
		t.Fatalf("%d copy attempts in 1.5 s while the store was down", tries)
	}
	if got := len(p.Log().LocalSegments()); got < n || p.Log().LocalLogStartOffset() != 0 || p.LogStartOffset() != 0 {
		t.Fatalf("store down: %d local segments of %d, local start %d, log start %d", got, n, p.Log().LocalLogStartOffset(), p.LogStartOffset())
	}
	if segs := m.b.RemoteMetadata().Segments(rp); len(segs) != 0 {
		t.Fatalf("%d segments readable while every upload failed", len(segs))
	}
	store.failing.Store(false)
	waitFor(t, "copies once the store is back", 20*time.Second, func() bool {
		return p.Log().LocalLogStartOffset() > 0 && p.Log().Size() <= 2048+2048
	})
	waitFor(t, "the dangling copies cleaned up", 10*time.Second, func() bool {
		for _, s := range m.b.RemoteMetadata().(*remote.Cache).All(rp) {
			if s.State != remote.CopyFinished {
				return false
			}
		}
		return true
	})
}

// TestTieredLeaderMoves: three brokers, RF 3. The followers delete local
// segments the leader copied once past local retention (which keeps some
// copied segments local, so a new leader that lost track of what was
// copied would copy them again). A copy that died
// half way (its .log object written, COPY_SEGMENT_STARTED) when the
// leader stops is cleaned up by the next leader, which deletes its
// objects; the next leader goes on from the highest offset copied in its
// epoch lineage, copying nothing already finished again.
func TestTieredLeaderMoves(t *testing.T) {
	store := &faultyStore{}
	q := newFakeQuorum()
	var ms []*member
	props := tieredProps()
	// A failed copy is retried (and its leftovers cleaned up by the
	// leader itself) only after 5 s: the leader stops before.
	props["remote.log.manager.task.retry.backoff.ms"] = "5000"
	props["remote.log.manager.task.retry.backoff.max.ms"] = "5000"
	for i := int32(1); i <= 3; i++ {
		ms = append(ms, startTiered(t, q, i, t.TempDir(), store, props))
	}
	if err := ms[0].b.CreateTopic("moves", 1, 3, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "16384",
	}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, seeds(ms), "moves", 300, 100)
	pm := partitionMeta(q, "moves", 0)
	leader := ms[pm.Leader-1]
	rp := remoteOf(t, leader.b, "moves", 0)
	waitFor(t, "copies, and every replica's local log bounded", 20*time.Second, func() bool {
		if len(leader.b.RemoteMetadata().Segments(rp)) < 5 {
			return false
		}
		for _, m := range ms {
			p, err := m.b.Partition("moves", 0)
			if err != nil || p.Log().LocalLogStartOffset() == 0 || p.Log().Size() > 16384+2048 {
				return false
			}
		}
		return true
	})
	// The next copy dies half way; the leader stops.
	store.failIndex.Store(true)
	produceN(t, seeds(ms), "moves", 30, 100)
	var dangling remote.Segment
	waitFor(t, "a dangling copy", 10*time.Second, func() bool {
		for _, s := range leader.b.RemoteMetadata().(*remote.Cache).All(rp) {
			// A copy whose index upload failed: one started before
			// failIndex may be past its index and finish.
			if s.State == remote.CopyStarted && store.wasRefused(remote.ObjectKey("", &s, remote.FileOffsetIndex)) {
				dangling = s
				_, err := store.Get(context.Background(), remote.ObjectKey("", &s, remote.FileLog), 0, -1)
				return err == nil
			}
		}
		return false
	})
	leader.stop()
	q.fence(leader.id)
	store.failIndex.Store(false)
	var next *member
	waitFor(t, "a new leader", 10*time.Second, func() bool {
		pm = partitionMeta(q, "moves", 0)
		return pm.Leader > 0 && pm.Leader != leader.id
	})
	next = ms[pm.Leader-1]
	var oldEnd int64 = -1
	for _, s := range next.b.RemoteMetadata().Segments(rp) {
		if s.BrokerID == leader.id {
			oldEnd = max(oldEnd, s.EndOffset)
		}
	}
	produceN(t, []string{ms[pm.Leader-1].addr}, "moves", 200, 100)
	var state string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dangling %d-%d; remote log metadata of the new leader %d: %s", dangling.StartOffset, dangling.EndOffset, next.id, state)
		}
	})
	waitFor(t, "the new leader copying, the dangling copy cleaned up", 20*time.Second, func() bool {
		segs := next.b.RemoteMetadata().(*remote.Cache).All(rp)
		state = ""
		for _, s := range segs {
			state += fmt.Sprintf(" [%d-%d %v by %d]", s.StartOffset, s.EndOffset, s.State, s.BrokerID)
		}
		newCopies := false
		for _, s := range segs {
			if s.State != remote.CopyFinished {
				return false
			}
			newCopies = newCopies || s.BrokerID == next.id
		}
		// The new leader may read the dangling COPY_SEGMENT_STARTED only
		// once its __remote_log_metadata HW passes it: wait for the
		// cleanup too.
		for k := remote.FileLog; k <= remote.FileLeaderEpochs; k++ {
			if _, err := store.Get(context.Background(), remote.ObjectKey("", &dangling, k), 0, -1); !errors.Is(err, objstore.ErrNotFound) {
				return false
			}
		}
		return newCopies
	})
	// More passes of the new leader's task, with its epoch in its log.
	time.Sleep(500 * time.Millisecond)
	segs := next.b.RemoteMetadata().Segments(rp)
	covered := int64(-1)
	for _, s := range segs {
		if s.BrokerID == next.id && s.EndOffset <= oldEnd || s.EndOffset <= covered {
			t.Fatalf("%d-%d copied again (covered up to %d; the old leader had copied up to %d)", s.StartOffset, s.EndOffset, covered, oldEnd)
		}
		covered = s.EndOffset
	}
	checkRemoteLog(t, store, segs, 0)
	for k := remote.FileLog; k <= remote.FileLeaderEpochs; k++ {
		if _, err := store.Get(context.Background(), remote.ObjectKey("", &dangling, k), 0, -1); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("the dangling copy's %s object: %v, want it deleted", k.Suffix(), err)
		}
	}
}

// TestTieredDeleteRecords: DeleteRecords below the local log start raises
// the log start to exactly the offset asked, and the remote segments
// wholly below it expire (their objects deleted); the one holding it
// stays.
func TestTieredDeleteRecords(t *testing.T) {
	store := &faultyStore{}
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), store, tieredProps())
	if err := m.b.CreateTopic("dr", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, []string{m.addr}, "dr", 300, 100)
	p, err := m.b.Partition("dr", 0)
	if err != nil {
		t.Fatal(err)
	}
	rp := remoteOf(t, m.b, "dr", 0)
	waitFor(t, "copies and local deletion", 20*time.Second, func() bool {
		return len(m.b.RemoteMetadata().Segments(rp)) >= 4 && p.Log().LocalLogStartOffset() > m.b.RemoteMetadata().Segments(rp)[2].EndOffset
	})
	segs := m.b.RemoteMetadata().Segments(rp)
	off := segs[2].StartOffset + 1
	if r := deleteRecords(t, m.addr, "dr", off, 10*time.Second); r.ErrorCode != 0 || r.LowWatermark != off {
		t.Fatalf("DeleteRecords: error %d, low watermark %d, want %d", r.ErrorCode, r.LowWatermark, off)
	}
	waitFor(t, "the remote segments below the log start expired", 10*time.Second, func() bool {
		left := m.b.RemoteMetadata().Segments(rp)
		return len(left) > 0 && left[0].ID == segs[2].ID
	})
	if ls := p.LogStartOffset(); ls != off {
		t.Fatalf("log start %d, want %d", ls, off)
	}
	for _, s := range segs[:2] {
		if _, err := store.Get(context.Background(), remote.ObjectKey("", &s, remote.FileLog), 0, -1); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("segment %d below the log start: %v, want deleted", s.StartOffset, err)
		}
	}
}

// TestTieredConfigRefusals: through a Kafka client, a compacted topic
// cannot enable remote storage and a tiered topic cannot turn it off
// (INVALID_CONFIG, as Kafka).
func TestTieredConfigRefusals(t *testing.T) {
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), &faultyStore{}, tieredProps())
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	on := "true"
	compact := "compact"
	r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": &on, "cleanup.policy": &compact}, "compacted")
	if err == nil {
		err = r.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("tiered compacted topic: %v, want INVALID_CONFIG", err)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": &on}, "tiered"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	off := "false"
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "remote.storage.enable", Value: &off}}, "tiered")
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = rs.On("tiered", nil); err == nil {
			err = r.Err
		}
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("turning remote storage off: %v, want INVALID_CONFIG", err)
	}
}

// TestTieredOpenTransaction: nothing at or above the last stable offset
// is copied: while a transaction is open, the copies stop below its first
// offset, however many segments roll after it; once it commits they go on.
func TestTieredOpenTransaction(t *testing.T) {
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), &faultyStore{}, tieredProps())
	if err := m.b.CreateTopic("txn", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, []string{m.addr}, "txn", 50, 100)
	tx, err := kgo.NewClient(kgo.SeedBrokers(m.addr), kgo.TransactionalID("tiered-tx"), kgo.DefaultProduceTopic("txn"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r, err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("in the transaction")}).First()
	if err != nil {
		t.Fatal(err)
	}
	first := r.Offset
	produceN(t, []string{m.addr}, "txn", 300, 100)
	p, err := m.b.Partition("txn", 0)
	if err != nil {
		t.Fatal(err)
	}
	rp := remoteOf(t, m.b, "txn", 0)
	waitFor(t, "copies up to the open transaction", 20*time.Second, func() bool {
		segs := m.b.RemoteMetadata().Segments(rp)
		return len(segs) > 0 && segs[len(segs)-1].EndOffset+20 >= first
	})
	time.Sleep(300 * time.Millisecond) // ten more passes
	if lso := p.LastStableOffset(); lso != first {
		t.Fatalf("last stable offset %d, want %d", lso, first)
	}
	for _, s := range m.b.RemoteMetadata().Segments(rp) {
		if s.EndOffset >= first {
			t.Fatalf("segment %d-%d copied, at or above the open transaction at %d", s.StartOffset, s.EndOffset, first)
		}
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "copies past the committed transaction", 20*time.Second, func() bool {
		segs := m.b.RemoteMetadata().Segments(rp)
		return len(segs) > 0 && segs[len(segs)-1].EndOffset > first+100
	})
}

// TestTieredTopicDeleted: deleting a tiered topic deletes its remote log
// (every object under the partition's prefix) and the metadata forgets
// it (RemotePartitionDeleteMetadata ... DELETE_PARTITION_FINISHED).
func TestTieredTopicDeleted(t *testing.T) {
	store := &faultyStore{}
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), store, tieredProps())
	if err := m.b.CreateTopic("gone", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, []string{m.addr}, "gone", 200, 100)
	rp := remoteOf(t, m.b, "gone", 0)
	waitFor(t, "copies", 20*time.Second, func() bool { return len(m.b.RemoteMetadata().Segments(rp)) >= 3 })
	if _, ok := gauge(t, "sluice_remote_copy_bytes_total", "gone"); !ok {
		t.Fatal("no sluice_remote_copy_bytes_total for the topic after its copies")
	}
	if err := m.b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the remote log deleted", 20*time.Second, func() bool {
		keys, err := store.List(context.Background(), remote.PartitionPrefix("", rp))
		return err == nil && len(keys) == 0 && len(m.b.RemoteMetadata().(*remote.Cache).All(rp)) == 0
	})
	// The deleted topic's per-topic counters are gone (Kafka's
	// BrokerTopicStats.removeMetrics).
	for _, name := range []string{"sluice_remote_copy_bytes_total", "sluice_remote_copy_requests_total"} {
		if v, ok := gauge(t, name, "gone"); ok {
			t.Errorf("%s{topic=gone} = %v after the topic was deleted", name, v)
		}
	}
}

// TestTieredRestartedBeforeMetadataRead: a broker restarted with a
// tiered partition whose older segments are only in the remote log
// answers a consumer fetch there with REPLICA_NOT_AVAILABLE (retriable,
// Kafka's "Remote log metadata cache is not initialized") until its
// remote log manager has read __remote_log_metadata, then with the
// records; never with OFFSET_OUT_OF_RANGE, which would send a consumer's
// auto.offset.reset past records that exist (the real-broker simulator
// found it: a leader back from a crash served nothing below its local
// log start).
func TestTieredRestartedBeforeMetadataRead(t *testing.T) {
	store := &faultyStore{}
	q := newFakeQuorum()
	dir := t.TempDir()
	m := startTiered(t, q, 1, dir, store, tieredProps())
	tieredBelowLocal(t, m)
	m.stop()
	// No pass of the manager for a while after the restart.
	props := tieredProps()
	props["remote.log.manager.task.interval.ms"] = "600000"
	m = startTiered(t, q, 1, dir, store, props)
	waitFor(t, "the restarted broker leads", 10*time.Second, func() bool {
		p, err := m.b.Partition("tiered", 0)
		return err == nil && p.IsLeader()
	})
	if code, _ := fetchAt(t, m, "tiered", 0); code != kerr.ReplicaNotAvailable.Code {
		t.Fatalf("fetch at 0 before the remote log metadata is read: %v, want REPLICA_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.b.SyncRemoteMetadata(ctx, remoteOf(t, m.b, "tiered", 0)); err != nil {
		t.Fatal(err)
	}
	if code, n := fetchAt(t, m, "tiered", 0); code != 0 || n == 0 {
		t.Fatalf("fetch at 0 once the metadata is read: %v, %d bytes", kerr.ErrorForCode(code), n)
	}
}

// tieredBelowLocal creates topic "tiered" (1 partition, RF 1, remote
// storage on, 2 KiB segments, 4 KiB local) on m and produces until its
// first segments are deleted locally.
func tieredBelowLocal(t *testing.T, m *member) {
	t.Helper()
	if err := m.b.CreateTopic("tiered", 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, []string{m.addr}, "tiered", 200, 100)
	p, err := m.b.Partition("tiered", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "segments deleted locally", 20*time.Second, func() bool { return p.Log().LocalLogStartOffset() > 0 })
}

// fetchAt sends one consumer Fetch of partition 0 of topic at offset to
// m and returns the partition's error code and record bytes.
func fetchAt(t *testing.T, m *member, topic string, offset int64) (int16, int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 100
	rt := kmsg.NewFetchRequestTopic()
	id, _ := m.b.TopicID(topic)
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, offset, 1<<20
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	fp := resp.Topics[0].Partitions[0]
	return fp.ErrorCode, len(fp.RecordBatches)
}

// TestTieredReadMetadataBehind: a consumer fetch between the log start and
// the local log start that the remote log metadata the broker reads by
// holds in no segment (here an empty one, as a new leader of
// __remote_log_metadata whose HW has not caught up answers) gets
// REPLICA_NOT_AVAILABLE, retriable, not OFFSET_OUT_OF_RANGE: the log
// start says the records exist.
func TestTieredReadMetadataBehind(t *testing.T) {
	store := &faultyStore{}
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), store, tieredProps(), func(o *broker.Options) { o.RemoteMetadata = &remote.MemMetadata{} })
	tieredBelowLocal(t, m)
	if code, _ := fetchAt(t, m, "tiered", 0); code != kerr.ReplicaNotAvailable.Code {
		t.Fatalf("fetch at 0, which the reader's metadata does not hold: %v, want REPLICA_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
}
